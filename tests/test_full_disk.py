"""A full disk at any point of a run is one message naming the path, exit 2, and the workspace as it was (issue 33).

A real full disk: the project that has run is copied onto a tmpfs a few MB larger than it, then
`python -m pipeline.repro` with new weights runs out of space while it saves the journal, while a stage writes, or while
DVC copies the outputs into its cache (each margin reaches the first of these it cannot pay for). Before: a 20-line
shutil.Error traceback and exit 1 while saving the journal; with a little more space, a message naming no path.
Mounting a tmpfs needs root (CAP_SYS_ADMIN): skipped without it.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import copy_project, run

pytestmark = pytest.mark.slow
PY = sys.executable
MB = 1 << 20
PAIRS = "sweep.w2=[" + ",".join(str(i) for i in range(1, 21)) + "]"


@pytest.fixture(scope="module")
def project(ran_project, tmp_path_factory) -> Path:
    root = copy_project(ran_project[0], tmp_path_factory.mktemp("full-disk") / "project")
    run(["git", "add", "-A"], root)
    run(["git", "-c", "user.name=t", "-c", "user.email=t@localhost", "commit", "-qm", "ran", "--allow-empty"], root)
    return root


def size_of(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file() and not p.is_symlink())


def run_on_full_disk(project: Path, where: Path, margin_mb: int, *overrides: str) -> subprocess.CompletedProcess:
    """`python -m pipeline.repro overrides` in a copy of `project` on a tmpfs `margin_mb` MB larger than it; checks
    that the copy is as it was afterwards (git, DVC's journal gone)."""
    where.mkdir(parents=True)
    size = size_of(project) // MB + 4 + margin_mb  # + 4: the folders' and small files' pages
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}M", "tmpfs", str(where)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({mounted.stderr.decode().strip()}): needs root")
    try:
        copy = Path(shutil.copytree(project, where / "project", symlinks=True))
        free = shutil.disk_usage(where).free
        result = run([PY, "-m", "pipeline.repro", *overrides], copy, check=False)
        assert "Traceback" not in result.stderr, result.stderr
        if result.returncode == 0:
            return result
        errors = [line for line in result.stderr.splitlines() if line.startswith(("error", "repro:"))]
        assert result.returncode == 2 and len(errors) == 1, (free, result.stderr)
        assert "no space left on the device (/" in errors[0] and str(where) in errors[0], errors
        assert run(["git", "status", "--porcelain"], copy).stdout == "", errors
        assert not (copy / ".dvc" / "tmp" / "repro-journal").exists()
        return result
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def first_line(result: subprocess.CompletedProcess) -> str:
    return next((line for line in result.stderr.splitlines() if line.startswith(("error", "repro:"))), "")


def point_reached(result: subprocess.CompletedProcess) -> str:
    """Where the run ran out of space: the journal, a stage, DVC's cache; or "finished"."""
    line = first_line(result)
    if result.returncode == 0:
        return "finished"
    if line.startswith("error in stage"):
        return "stage"
    if "where DVC writes the outputs and its cache" in line:
        return "dvc"
    assert line.startswith("error: no space left on the device (") and line.endswith("Nothing was changed."), line
    return "journal"


def test_a_full_disk_at_each_point_of_a_run(project, tmp_path, private_mlflow_store):
    """More room each time, 1 MB at a time, until the run finishes: the disk fills while the journal copies the small
    outputs (the 4 MB report among them) before anything changes, then while the figures stage writes 21 projections,
    then while DVC copies the new outputs into its cache (its copy names no file: the message names the project DVC
    writes in), in that order, each one message and the workspace as it was (run_on_full_disk); the MLflow run the
    figures stage had logged then is ended FAILED (before: FINISHED, for results put back). The margins follow the
    outputs' sizes instead of fixed numbers, which every new output would move."""
    import sqlite3

    points = []
    for margin in range(1, 60):
        result = run_on_full_disk(project, tmp_path / f"disk{margin}", margin, PAIRS, "sweep.w1=1")
        points.append(point_reached(result))
        if points[-1] == "dvc":
            assert "it logged is ended FAILED." in result.stderr, result.stderr
            with sqlite3.connect(private_mlflow_store.removeprefix("sqlite:///")) as store:
                assert {status for (status,) in store.execute("SELECT status FROM runs")} == {"FAILED"}
        if points[-1] == "finished":
            break
    order = ["journal", "stage", "dvc", "finished"]
    assert sorted(points, key=order.index) == points and set(points) == set(order), points
