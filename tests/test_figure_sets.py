"""Figure sets (figures=all|summary|none) and how figures are drawn: one rendering per figure, the same bytes as
matplotlib's savefig, whatever the number of worker processes."""

from __future__ import annotations

import re
import sys

import pytest

from conftest import REPO, params_for, run_stages, typed


def test_every_set_is_an_option_file_and_all_draws_every_kind():
    from pipeline.config.figure_sets import FIGURE_SET_NAMES, FIGURE_SETS

    assert set(FIGURE_SET_NAMES) == {p.stem for p in (REPO / "conf" / "figures").glob("*.yaml")}
    assert all("all" in sets for sets in FIGURE_SETS.values())  # the default run draws what it always drew
    assert {kind for kind, sets in FIGURE_SETS.items() if "summary" in sets} == {"panels", "ratio_sweep", "crossover"}


@pytest.mark.parametrize("option", ["all", "summary", "none"])
def test_each_option_composes_to_its_set(option):
    from pipeline import config

    params = config.compose([f"figures={option}"], REPO)
    config.validate(params)
    assert params["figures"]["name"] == option
    assert params["figures"]["dpi"] == 110  # the other settings are figures=all's


def test_an_unknown_set_is_refused_naming_the_key():
    from pipeline import config
    from pipeline.base.errors import PipelineError

    with pytest.raises(PipelineError, match=r"figures\.name = 'some'.*one of all, summary, none"):
        config.validate(config.compose(["figures.name=some"], REPO))


@pytest.fixture(scope="module")
def summary_run(tmp_path_factory, small_store):
    out = tmp_path_factory.mktemp("summary")
    return run_stages(params_for("figures=summary"), out, small_store, upto="figures")


@pytest.mark.slow
def test_summary_draws_the_panels_and_ratio_sweeps_and_the_report_names_the_rest(summary_run):
    names = sorted(p.name for p in summary_run.figures_dir.glob("*/*"))
    assert names == ["panels_s0.png", "panels_s1.png", "ratio_sweep_s0.png", "ratio_sweep_s1.png"]
    page = summary_run.report_html.read_text(encoding="utf-8")
    assert len(re.findall(r'<img alt="[^"]*" data-figure="[^"]*" src="data:image/png;base64,', page)) == 4
    for missing in ("pe_heatmap.png", "pe_norms.png", "projection_s1_w1_1-w2_10.png", "tutorial*.png"):
        assert f"{missing} not drawn (figures=summary)" in page


@pytest.mark.slow
def test_none_draws_nothing_and_the_report_keeps_its_sentences(tmp_path, small_store):
    layout = run_stages(params_for("figures=none"), tmp_path, small_store, upto="figures")
    assert layout.sweep_figures_dir.is_dir() and not any(layout.figures_dir.glob("*/*"))
    page = layout.report_html.read_text(encoding="utf-8")
    assert "<img" not in page and "panels_s1.png not drawn (figures=none)" in page
    assert "metrics against r, sentence 1: ratio_sweep_s1.png not drawn" in page  # both sentences
    assert '"king queen' in page  # the explorer still has the sentences


@pytest.mark.slow
def test_worker_processes_draw_the_same_bytes_as_this_process(summary_run, tmp_path):
    from pipeline.figures.folders import render

    params = typed(params_for("figures=summary", "figures.workers=1"))
    names = render(params, summary_run, tmp_path)
    assert sorted(names) == sorted(p.name for p in summary_run.sweep_figures_dir.iterdir())  # drawn with workers=2
    for name in names:
        assert (tmp_path / name).read_bytes() == (summary_run.sweep_figures_dir / name).read_bytes(), name


@pytest.mark.parametrize("layout", [None, "constrained"])
def test_save_writes_capped_deterministic_pngs_and_shows_the_hooks_the_written_figure(tmp_path, layout, monkeypatch):
    """save() is savefig at the output dpi: the size capped at MAX_INCHES, the same bytes every time, no temporary
    file left, and the SAVED hooks see the figure at the dpi it was written at."""
    import struct

    import matplotlib.pyplot as plt
    import numpy as np

    from pipeline.figures import drawing as fig

    def draw(inches=(6, 4)):
        figure, ax = plt.subplots(figsize=inches, layout=layout)
        image = ax.imshow(np.arange(48.0).reshape(6, 8), cmap="viridis")
        figure.colorbar(image, ax=ax, label="value")
        ax.set(title="a title long enough to matter for the layout", xlabel="position b", ylabel="position a")
        return figure

    seen = []
    monkeypatch.setattr(fig, "SAVED", [lambda figure, path: seen.append((figure.dpi, path.name))])
    fig.save(draw(), tmp_path / "a.png", 110)
    fig.save(draw(), tmp_path / "b.png", 110)
    fig.save(draw((40, 30)), tmp_path / "huge.png", 50)
    assert (tmp_path / "a.png").read_bytes() == (tmp_path / "b.png").read_bytes()
    width, height = struct.unpack(">II", (tmp_path / "huge.png").read_bytes()[16:24])
    assert (width, height) == (round(fig.MAX_INCHES[0] * 50), round(fig.MAX_INCHES[1] * 50))
    assert seen == [(110, "a.png"), (110, "b.png"), (50, "huge.png")]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.png", "b.png", "huge.png"]  # no temp file left


def _fail(message: str) -> None:
    raise ValueError(message)


def kept_pool(worker_pool):
    """The pool worker_pool keeps for this process, if any."""
    return worker_pool._kept[1] if worker_pool._kept else None


@pytest.fixture
def kept_pools(monkeypatch):
    """pipeline.base.worker_pool.keep() for one test; the kept pool is ended after it."""
    from pipeline.base import worker_pool

    monkeypatch.setattr(worker_pool, "_keep", True)
    yield worker_pool
    worker_pool._end_kept()


@pytest.mark.slow
def test_a_kept_pool_serves_every_batch_and_draws_the_same_bytes(summary_run, tmp_path, kept_pools):
    """A multirun's jobs share one pool (pipeline.base.worker_pool.keep()): the same workers draw every batch, the
    same bytes as new workers, and end with the pool."""
    import dataclasses

    from pipeline.base.processes import running
    from pipeline.figures.folders import render

    params = typed(params_for("figures=summary"))
    assert params.figures.workers == 2
    outs = [tmp_path / "first", tmp_path / "second"]
    for out in outs:
        out.mkdir()
        render(params, dataclasses.replace(summary_run, shared=out.with_suffix(".cache")), out)  # every figure drawn
        if out == outs[0]:
            pool = kept_pool(kept_pools)
            pids = sorted(pool._processes)
    assert kept_pool(kept_pools) is pool and sorted(pool._processes) == pids and len(pids) == 2
    for png in summary_run.sweep_figures_dir.iterdir():  # drawn by a pool of its own (not kept)
        assert (outs[0] / png.name).read_bytes() == (outs[1] / png.name).read_bytes() == png.read_bytes(), png.name
    kept_pools._end_kept()
    assert kept_pool(kept_pools) is None and not any(running(pid) for pid in pids)


def test_a_failed_batch_ends_the_kept_pool_and_the_next_starts_afresh(kept_pools):
    import os

    from pipeline.figures.batch import Batch

    batch = Batch()
    batch.add(os.getpid)
    batch.add(_fail, "a figure that cannot be drawn")
    with pytest.raises(ValueError, match="cannot be drawn"):
        batch.run(2)
    assert kept_pool(kept_pools) is None
    again = Batch()
    again.add(os.getpid)
    again.add(os.getpid)
    pids = again.run(2)
    assert os.getpid() not in pids and kept_pool(kept_pools) is not None
    assert set(pids) <= set(kept_pool(kept_pools)._processes)


def test_the_kept_pool_ends_when_its_process_exits(tmp_path):
    """Workers of a kept pool do not outlive the process (a multirun's), even when it never ends the pool itself."""
    from conftest import run
    from pipeline.base.processes import running

    script = (
        "import os\n"
        "from pipeline.base import worker_pool\n"
        "from pipeline.figures.batch import Batch\n"
        "worker_pool.keep()\n"
        "batch = Batch()\n"
        "[batch.add(os.getpid) for _ in range(4)]\n"
        "drawn_by = set(batch.run(2))\n"
        "print(*sorted(drawn_by | set(worker_pool._kept[1]._processes)))\n"
    )
    out = run([sys.executable, "-c", script], REPO)
    pids = [int(pid) for pid in out.stdout.split()]
    assert len(pids) == 2 and not any(running(pid) for pid in pids)


def test_the_workers_of_a_killed_process_exit():
    """A multirun killed with SIGKILL (no atexit) must not leave its kept figure workers running: each exits once its
    parent is gone (pipeline.base.worker_pool: a thread of each worker watches it)."""
    import time

    from conftest import run
    from pipeline.base.processes import running

    script = (
        "import os, signal\n"
        "from pipeline.base import worker_pool\n"
        "from pipeline.figures.batch import Batch\n"
        "worker_pool.keep()\n"
        "batch = Batch()\n"
        "[batch.add(os.getpid) for _ in range(4)]\n"
        "batch.run(2)\n"
        "print(*sorted(worker_pool._kept[1]._processes), flush=True)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    out = run([sys.executable, "-c", script], REPO, check=False)
    assert out.returncode == -9, out.stderr
    pids = [int(pid) for pid in out.stdout.split()]
    assert len(pids) == 2
    deadline = time.monotonic() + 60  # guards a hang: the workers exit within a second when the machine is quiet
    while any(running(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(running(pid) for pid in pids)
