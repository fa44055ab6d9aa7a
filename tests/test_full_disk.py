"""A full disk at any point of a run is one message naming the path, exit 2, and the workspace as it was (issue 33).

A real full disk: the project that has run is copied onto a tmpfs a few MB larger than it, then
`python -m pipeline.repro` with new weights runs out of space while it saves the journal, while a stage writes, or while
DVC copies the outputs into its cache (each margin reaches the first of these it cannot pay for). Before: a 20-line
shutil.Error traceback and exit 1 while saving the journal; with a little more space, a message naming no path.
Mounting a tmpfs needs root (CAP_SYS_ADMIN): skipped without it.
"""

from __future__ import annotations

import re
import shutil
import sqlite3
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


def journal_mb(project: Path) -> int:
    """MB that the journal copies before a run changes anything: the outputs and files a run may change
    (pipeline.repro.guarded_paths) of up to pipeline.base.snapshot.LINK_ABOVE bytes (larger ones are hard-linked)."""
    from pipeline.base.snapshot import LINK_ABOVE
    from pipeline.repro import guarded_paths

    files = [f for path in guarded_paths(project) for f in (path.rglob("*") if path.is_dir() else [path])]
    return sum(size for f in files if f.is_file() and 0 < (size := f.stat().st_size) <= LINK_ABOVE) // MB


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
    """With more room, the disk fills later: while the journal copies the small outputs (the 4 MB report among them)
    before anything changes, then while a stage writes (the figures stage's 21 projections), then while DVC copies the
    new outputs into its cache (its copy names no file: the message names the project DVC writes in), then the run
    finishes; in that order, each one message and the workspace as it was (run_on_full_disk). The margins follow the
    outputs' sizes instead of fixed numbers, which every new output would move.

    Which margins: 1 MB, then doubling from the first power of 2 above what the journal copies (journal_mb: the
    margins below it end in the journal as 1 MB does; docs/benchmarks.md#the-test-suite) until the run finishes, then
    halving any gap between two margins whose points are not next to each other in that order, until every point is
    reached. The margins in between are not run: at each point one handler sees every full disk it meets, whichever
    file fills it (an OSError caught in `pipeline.repro` while it saves the journal, in
    `pipeline.stages._cli.stage_main` for every write of a stage, in `pipeline.repro.MachineErrors` for DVC's), and
    the workspace is put back on a disk that is full at every one of them; a margin only chooses the file that fills
    it. Where DVC's copy fills it, the MLflow run the figures stage had logged is ended FAILED (results put back are
    not reported done)."""
    order = ["journal", "stage", "dvc", "finished"]
    reached: dict[int, str] = {}

    def point_at(margin: int) -> str:
        if margin not in reached:
            result = run_on_full_disk(project, tmp_path / f"disk{margin}", margin, PAIRS, "sweep.w1=1")
            reached[margin] = point_reached(result)
            if reached[margin] == "dvc":
                run = re.search(r"the MLflow run (\w+) it logged is ended FAILED\.", result.stderr)
                assert run, result.stderr
                with sqlite3.connect(private_mlflow_store.removeprefix("sqlite:///")) as store:
                    query = "SELECT status FROM runs WHERE run_uuid = ?"
                    assert store.execute(query, (run[1],)).fetchall() == [("FAILED",)]
        return reached[margin]

    point_at(1)
    margin = 1 << journal_mb(project).bit_length()
    while point_at(margin) != "finished":
        assert margin < 256, reached  # the outputs are tens of MB
        margin *= 2
    gaps = [(a, b) for a, b in zip(sorted(reached), sorted(reached)[1:])]
    while gaps:
        low, high = gaps.pop()
        if order.index(point_at(high)) - order.index(point_at(low)) > 1 and high - low > 1:
            middle = (low + high) // 2
            point_at(middle)
            gaps += [(low, middle), (middle, high)]
    points = [reached[m] for m in sorted(reached)]
    print("margin (MB) -> point:", reached)
    assert sorted(points, key=order.index) == points and set(points) == set(order), reached
