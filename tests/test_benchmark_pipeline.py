"""`python -m benchmarks.pipeline --quick` on a tiny config: every section measured, the checkout left alone."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from benchmarks.notebook_script import FIGURE_COUNT, TEXTS
from benchmarks.pipeline import TARGETS
from pipeline.stages.registry import STAGES
from conftest import REPO, run

pytestmark = pytest.mark.slow  # four pipeline runs, the notebook script and a 2-point multirun: minutes

SECTIONS = (
    "first_run",
    "notebook",
    "fresh_repro",
    "noop_repro",
    "sweep_edit",
    "multirun",
    "hydra_noop_project_config",
    "hydra_noop",
    "floor_fresh",
    "floor_noop",
)


def tiny_glove_text(path) -> None:
    """The notebook's words (and a few more) with random 50-d vectors, as GloVe text."""
    rng = np.random.default_rng(0)
    words = sorted({w for text in TEXTS for w in text.split()}) + ["the", "a", "of"]
    path.write_text(
        "".join(w + "".join(f" {v:.5f}" for v in rng.normal(size=50)) + "\n" for w in words), encoding="utf-8"
    )


def test_quick_benchmark_measures_every_section(checkout, tmp_path):
    glove, out = tmp_path / "glove.txt", tmp_path / "pipeline.json"
    tiny_glove_text(glove)
    result = run(
        [
            sys.executable,
            "-m",
            "benchmarks.pipeline",
            "--quick",
            "--points",
            "2",
            "--silent",
            "--source",
            str(checkout),
            "--glove-text",
            str(glove),
            "--out",
            str(out),
            "-o",
            "texts=queen_king",
            "-o",
            "sweep.ratios.points=5",
            "-o",
            "figures=none",  # every section still runs every stage; drawing is the figure tests' concern
        ],
        cwd=REPO,
        timeout=1800,
    )
    assert "fresh dvc repro -f / notebook, wall" in result.stdout
    data = json.loads(out.read_text(encoding="utf-8"))

    for section in SECTIONS:
        for key in ("wall_s", "cpu_s", "peak_rss_mb"):
            assert data[section][key] > 0, (section, key, data[section][key])
    assert data["notebook"]["figures"] == FIGURE_COUNT
    assert "forced_repro" not in data  # figures=none leaves no figure to cache: the fresh repro is not timed again
    # a forced repro runs every stage, each measured in its own process
    assert list(data["fresh_repro"]["stages"]) == [stage.name for stage in STAGES]
    for name, stage in data["fresh_repro"]["stages"].items():
        assert stage["wall_s"] > 0 and stage["cpu_s"] > 0 and stage["peak_rss_mb"] > 0, name
    # nothing to do: no stage; a sweep value: the sweep and what depends on it, never the GloVe store
    assert data["noop_repro"]["stages"] == {}
    assert "sweep" in data["sweep_edit"]["stages"] and "glove" not in data["sweep_edit"]["stages"]
    multirun = data["multirun"]
    assert multirun["points"] == 2 and multirun["jobs"] == 2 and multirun["failed_jobs"] == 0
    assert multirun["per_point_wall_s"] > 0 and multirun["stages"]["sweep"]["calls"] == 2
    starts = multirun["stages"]["sweep"]["call_starts_s"]  # the second point's sweep starts after the first's
    assert 0 < starts[0] < starts[1] < multirun["wall_s"] and multirun["steady_per_point_wall_s"] == pytest.approx(
        starts[1] - starts[0]
    )
    # Hydra's sweeper composes every job once before launching any: timed, and counted per point in the estimates
    check = multirun["stages"]["hydra sweeper check"]
    assert check["calls"] == 1 and check["wall_s"] > 0
    assert multirun["check_per_point_wall_s"] == pytest.approx(check["wall_s"] / 2)
    per_point = multirun["steady_per_point_wall_s"] + multirun["check_per_point_wall_s"]
    for points in (100, 1000):
        estimate = data["ratios"][f"multirun_{points}_points_wall_s"]
        assert estimate == pytest.approx(multirun["wall_s"] + (points - 2) * per_point)
    # the floors measured in the same run: a trivial chain of as many DVC stages, and the libraries' imports
    assert data["floor_fresh"]["stage_count"] == len(STAGES)
    assert len(data["floor_fresh"]["stages"]) == len(STAGES) and data["floor_noop"]["stages"] == {}
    assert data["ratios"]["noop_wall_vs_dvc_floor"] == pytest.approx(
        data["noop_repro"]["wall_s"] / data["floor_noop"]["wall_s"]
    )
    assert set(data["imports"]) >= {"(interpreter)", "torch", "mlflow"}
    assert all(wall > 0 for wall in data["imports"].values())
    assert "DVC floor: trivial" in result.stdout and "target (issue 42)" in result.stdout
    # the multirun's reference: Hydra's own multirun of as many jobs of an app that does nothing
    assert data["ratios"]["multirun_wall_vs_hydra_noop"] == pytest.approx(
        multirun["wall_s"] / data["hydra_noop"]["wall_s"]
    )
    # and the same jobs' commands with a task doing nothing: what Hydra alone costs a job of this project's config
    assert data["ratios"]["multirun_wall_vs_hydra_noop_project_config"] == pytest.approx(
        multirun["wall_s"] / data["hydra_noop_project_config"]["wall_s"]
    )
    assert "the same jobs on this config, a task doing nothing" in result.stdout
    assert set(data["checks"]) == set(TARGETS)
    assert all(value > 0 for value in data["ratios"].values())

    # measured in a clone: the checkout has no new run, data or config change
    status = subprocess.run(
        ["git", "status", "--porcelain", "--ignored"], cwd=checkout, capture_output=True, text=True, check=True
    ).stdout
    assert status == "", status


def test_the_glove_text_is_written_into_the_temporary_folder(tmp_path):
    """The notebook's 164 MB GloVe text goes into the folder the benchmark removes at its end (`--quick` included),
    never under the project's data/cache/benchmarks/."""
    from benchmarks.ingest import DEFAULT_FILE
    from benchmarks.pipeline import glove_text

    before = DEFAULT_FILE.exists()
    path = glove_text(None, tmp_path)
    assert path.parent == tmp_path and path.stat().st_size > 100e6
    assert DEFAULT_FILE.exists() == before
