"""A sweep draws a figure once for the same data (pipeline.figures.cache): the jobs after the first link its
PNG, byte-identical to drawing it; anything the figure is drawn from gives it a new key."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from conftest import params_for, run_stages, typed


def draw_stub(values, path: Path, *, title: str) -> list[str]:
    path.write_text(f"{title}: {list(values)}")
    return [path.name]


def test_the_key_follows_the_data_and_the_output_name_not_the_folder(tmp_path):
    from pipeline.figures.cache import job_key

    def key(values, name="a.png", out=tmp_path / "one", title="t", draw=draw_stub):
        return job_key((draw, (values, out / name), {"title": title}), out)

    first, outputs = key(np.arange(3.0))
    assert outputs == {"a.png": tmp_path / "one" / "a.png"}
    assert key(np.arange(3.0), out=tmp_path / "two")[0] == first  # another job's folder: the same figure
    assert key(np.arange(3.0) + 1e-12)[0] != first  # the last bit of the data
    assert key(np.arange(3.0), name="b.png")[0] != first
    assert key(np.arange(3.0), title="u")[0] != first
    assert key(np.arange(3.0), draw=test_the_key_follows_the_data_and_the_output_name_not_the_folder)[0] != first
    # a path outside the output folder is data: the key holds the path (a file read there is not hashed, so a
    # figure job must be given data, not files)
    elsewhere = job_key((draw_stub, ([1], tmp_path / "x" / "a.png"), {"title": "t"}), tmp_path / "one")
    assert elsewhere[1] == {} and elsewhere[0] != first
    assert job_key((draw_stub, (lambda: 1, tmp_path / "one" / "a.png"), {}), tmp_path / "one") is None  # no pickle


def test_a_job_is_drawn_once_and_linked_after(tmp_path):
    from pipeline.figures.batch import Batch

    cache, drawn = tmp_path / "cache", []

    def run(job: str, values) -> list:
        out = tmp_path / job
        out.mkdir()
        batch = Batch(out, cache=cache)
        batch.add(draw_stub, values, out / "a.png", title="same")
        batch.add(draw_stub, [job], out / "b.png", title="own")
        results = batch.run(workers=1)
        drawn.append(sorted(p.name for p in cache.iterdir()))
        return results

    assert run("one", [1, 2]) == [["a.png"], ["b.png"]]
    assert run("two", [1, 2]) == [["a.png"], ["b.png"]]  # what the job returned, from the entry
    assert (tmp_path / "two" / "a.png").stat().st_ino == (tmp_path / "one" / "a.png").stat().st_ino  # linked
    assert (tmp_path / "two" / "b.png").read_text() == "own: ['two']"  # its own data: drawn
    assert [len(names) for names in drawn] == [2, 3]  # a, b of one; b of two
    assert not [p for p in cache.iterdir() if p.name.startswith(".")]  # no temp folder left


def test_an_incomplete_entry_is_drawn_again(tmp_path):
    from pipeline.figures.cache import job_key, restore

    out = tmp_path / "out"
    key, outputs = job_key((draw_stub, ([1], out / "a.png"), {"title": "t"}), out)
    entry = tmp_path / "cache" / key
    entry.mkdir(parents=True)
    assert restore(entry, outputs) == (False, None)  # nothing there: not found, nothing linked
    assert not out.exists()


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
    figures=all would): the second point links them; its panels are its own. Same bytes as drawn alone."""
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
        assert (one / name).stat().st_ino == (two / name).stat().st_ino
    assert (one / "panels_s0.png").read_bytes() != (two / "panels_s0.png").read_bytes()
    alone = base / "alone"
    alone.mkdir()
    params, layout = points[30]
    render(params, layout, alone)  # no shared folder: everything drawn here
    for name in names:
        assert (alone / name).read_bytes() == (two / name).read_bytes(), name
