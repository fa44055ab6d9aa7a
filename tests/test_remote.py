"""The DVC remote: the committed default is a folder beside the project (works offline, no setup); one clone
runs the pipeline and pushes, a second clone pulls and then has nothing to reproduce."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from conftest import REPO, copy_project, run

PY = sys.executable
GIT_ID = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@l", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@l"}
REMOTE = "storage"  # the default remote's name in .dvc/config


def test_default_remote_is_a_folder_beside_the_project():
    assert run(["dvc", "remote", "default"], REPO).stdout.strip() == REMOTE
    remotes = dict(line.split()[:2] for line in run(["dvc", "remote", "list"], REPO).stdout.splitlines())
    assert Path(remotes[REMOTE]) == REPO.parent / "pe-pipeline-dvc-storage"


def use_remote(checkout: Path, remote: Path) -> None:
    """Point the default remote at `remote` in .dvc/config.local (never committed), so the test writes only there."""
    run(["dvc", "remote", "modify", "--local", REMOTE, "url", str(remote)], checkout)


@pytest.mark.slow
def test_push_then_pull_in_a_second_clone_leaves_nothing_to_reproduce(ran_project, tmp_path):
    remote = tmp_path / "remote"
    first = copy_project(ran_project[0], tmp_path / "first")  # a clone after `python -m pipeline.repro`
    use_remote(first, remote)
    run(["git", "add", "-A"], first)
    run(["git", "commit", "-qm", "pipeline run", "--allow-empty"], first, **GIT_ID)
    run(["dvc", "push"], first)
    assert any(path.is_file() for path in remote.rglob("*"))

    second = tmp_path / "second"
    run(["git", "clone", "-q", str(first), str(second)], tmp_path)
    assert not (second / "data/glove").exists()
    use_remote(second, remote)
    run(["dvc", "pull"], second)
    for output in ("data/glove/vectors.npy", "data/sweep/projections.npz", "reports/figures/encode/pe_heatmap.png"):
        assert (second / output).read_bytes() == (first / output).read_bytes(), output
    assert json.loads(run(["dvc", "status", "--json"], second).stdout) == {}
    again = run(["dvc", "repro"], second)
    assert "Running stage" not in again.stdout and "up to date" in again.stdout
    assert run(["git", "status", "--porcelain"], second).stdout == ""
    assert not (tmp_path / "pe-pipeline-dvc-storage").exists()  # the committed default was never used
