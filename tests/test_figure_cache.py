"""A figure is drawn once for the same data by the same code (pipeline.figures.cache): later jobs copy its PNG,
byte-identical to drawing it; anything the figure is drawn from gives it a new key, and a damaged entry is drawn
again."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from conftest import copy_project, params_for, run_stages, typed


def draw_stub(values, path: Path, *, title: str) -> list[str]:
    path.write_text(f"{title}: {list(values)}")
    return [path.name]


def test_the_key_follows_the_data_the_output_name_and_the_code_not_the_folder(tmp_path, monkeypatch):
    from pipeline.figures import cache
    from pipeline.figures.cache import job_key

    def key(values, name="a.png", out=tmp_path / "one", title="t", draw=draw_stub):
        return job_key((draw, (values, out / name), {"title": title}))

    first, outputs = key(np.arange(3.0))
    assert outputs == {"a.png": tmp_path / "one" / "a.png"}
    assert key(np.arange(3.0), out=tmp_path / "two")[0] == first  # another folder: the same figure
    assert key(np.arange(3.0) + 1e-12)[0] != first  # the last bit of the data
    assert key(np.arange(3.0), name="b.png")[0] != first
    assert key(np.arange(3.0), title="u")[0] != first
    assert (
        key(np.arange(3.0), draw=test_the_key_follows_the_data_the_output_name_and_the_code_not_the_folder)[0] != first
    )
    assert job_key((draw_stub, (lambda: 1, tmp_path / "one" / "a.png"), {})) is None  # no pickle: not keyed
    monkeypatch.setattr(cache, "fingerprint", lambda: "other code or libraries")
    assert key(np.arange(3.0))[0] != first  # the drawing code or matplotlib changed: drawn again


def test_a_job_is_drawn_once_and_copied_after(tmp_path):
    from pipeline.figures.batch import Batch

    cache, drawn = tmp_path / "cache", []

    def run(job: str, values, workers: int = 1) -> list:
        out = tmp_path / job
        out.mkdir()
        batch = Batch(cache=cache)
        with batch.drawing(workers) as results:
            batch.add(draw_stub, values, out / "a.png", title="same")
            batch.add(draw_stub, [job], out / "b.png", title="own")
        drawn.append(batch.drawn)
        return results

    assert run("one", [1, 2]) == [["a.png"], ["b.png"]]
    assert run("two", [1, 2], workers=2) == [["a.png"], ["b.png"]]  # what the job returned, from the entry
    assert (tmp_path / "two" / "a.png").read_text() == "same: [1, 2]"
    assert (tmp_path / "two" / "a.png").stat().st_ino != (tmp_path / "one" / "a.png").stat().st_ino  # a copy
    assert (tmp_path / "two" / "b.png").read_text() == "own: ['two']"  # its own data: drawn
    assert drawn == [2, 1] and len(list(cache.iterdir())) == 3  # a, b of one; b of two
    assert not [p for p in cache.iterdir() if p.name.startswith(".")]  # no temp folder left


def test_a_damaged_or_incomplete_entry_is_drawn_again(tmp_path):
    from pipeline.figures.batch import Batch
    from pipeline.figures.cache import job_key, restore

    out, cache = tmp_path / "out", tmp_path / "cache"
    key, outputs = job_key((draw_stub, ([1], out / "a.png"), {"title": "t"}))
    entry = cache / key
    entry.mkdir(parents=True)
    assert restore(entry, outputs) == (False, None)  # nothing there: not found, nothing copied
    assert not out.exists()
    entry.rmdir()
    out.mkdir()
    batch = Batch(cache=cache)
    batch.add(draw_stub, [1], out / "a.png", title="t")
    batch.run(1)
    (entry / "a.png").write_text("t: [2]")  # a byte changed in the cache (or in an output hard-linked to it)
    batch = Batch(cache=cache)
    batch.add(draw_stub, [1], out / "a.png", title="t")
    assert batch.run(1) == [["a.png"]] and batch.drawn == 1
    assert (out / "a.png").read_text() == "t: [1]" and (entry / "a.png").read_text() == "t: [1]"


def test_the_checkout_cache_is_pruned_least_recently_used_first(tmp_path):
    import os

    from pipeline.figures.cache import prune

    for age, name in enumerate(("new", "middle", "old")):
        entry = tmp_path / name
        entry.mkdir()
        (entry / "a.png").write_bytes(b"x" * 1000)
        os.utime(entry, (1e9 - age, 1e9 - age))
    prune(tmp_path, max_bytes=2000)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["middle", "new"]


@pytest.fixture(scope="module")
def summary_points(tmp_path_factory, small_store):
    """Two points of a sweep over sweep.w2, stages up to sweep, and a shared folder."""
    base = tmp_path_factory.mktemp("points")
    points = {}
    for w2 in (3, 30):
        params = params_for("figures=summary", "figures.workers=1", f"sweep.w2={w2}")
        points[w2] = typed(params), run_stages(params, base / str(w2), small_store, upto="sweep")
    return base, points


@pytest.mark.slow
def test_a_sweep_over_the_weights_draws_the_metrics_against_r_once(summary_points, monkeypatch):
    """figures=summary: the metrics against r do not change with the weights (only the pairs marked in
    figures=all would): the second point copies them; its panels are its own. Same bytes as drawn alone."""
    from pipeline.figures import projections, ratio_sweep
    from pipeline.figures.folders import render

    base, points = summary_points
    drawn = []
    for module, name in ((ratio_sweep, "ratio_curves"), (projections, "projection_panels")):
        real = getattr(module, name)

        def counted(*args, _real=real, **kwargs):
            drawn.append(_real.__name__)
            return _real(*args, **kwargs)

        counted.__module__, counted.__qualname__ = real.__module__, real.__qualname__  # keyed as the real one
        monkeypatch.setattr(module, name, counted)
    written = {}
    for w2, (params, layout) in points.items():
        shared = dataclasses.replace(layout, shared=base / "shared")
        out = base / f"figures-{w2}"
        out.mkdir()
        written[w2] = (out, sorted(render(params, shared, out)))
    assert drawn == ["projection_panels", "ratio_curves"] * 2 + ["projection_panels"] * 2
    (one, names), (two, names_two) = written.values()
    assert names == names_two == ["panels_s0.png", "panels_s1.png", "ratio_sweep_s0.png", "ratio_sweep_s1.png"]
    for name in ("ratio_sweep_s0.png", "ratio_sweep_s1.png"):
        assert (one / name).read_bytes() == (two / name).read_bytes()
    assert (one / "panels_s0.png").read_bytes() != (two / "panels_s0.png").read_bytes()
    alone = base / "alone"
    alone.mkdir()
    params, layout = points[30]
    render(params, dataclasses.replace(layout, shared=base / "alone"), alone)  # an empty cache: everything drawn
    for name in names:
        assert (alone / name).read_bytes() == (two / name).read_bytes(), name


def test_an_edit_of_one_part_of_the_encode_stage_redraws_only_its_figures(seed_figures, tmp_path, pipeline_log):
    """The encode stage draws the encoding's, RoPE's, ALiBi's, the families' and the tutorials' figures: after a run
    that drew them all (seed_figures, a checkout: its figure cache is data/cache/figures), an edit of the encoding
    redraws the encoding's five, and the others are copied from the figure cache, with the bytes drawing them gives."""
    import re

    run = copy_project(seed_figures.base, tmp_path / "run")

    def encode_figures() -> dict[Path, bytes]:
        dirs = ("encode_figures_dir", "relative_figures_dir", "tutorial_figures_dir")
        layout = dataclasses.replace(seed_figures, base=run)
        return {p.relative_to(run): p.read_bytes() for name in dirs for p in getattr(layout, name).rglob("*.png")}

    before = encode_figures()
    assert (run / "data" / "cache" / "figures").is_dir()
    run_stages(params_for("figures.workers=1", "encoding.base=1000"), run, seed_figures.glove, upto="encode")
    line = next(r.getMessage() for r in pipeline_log.records if "copied from the figure cache" in r.getMessage())
    assert tuple(int(n) for n in re.findall(r"(\d+) (?:drawn|copied)", line)) == (5, len(before) - 5)
    after = encode_figures()
    changed = {str(p) for p in before if after[p] != before[p]}
    assert changed and all(p.startswith("reports/figures/encode/") for p in changed)
    assert set(after) == set(before)
