"""Temporaries of a killed run (kill -9 mid-write) are removed by the next run and never seen by `git status`."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from pipeline.base.files import TEMP_MARK, atomic_path, clean_stale_temporaries, replace_dir, temp_prefix

REPO = Path(__file__).resolve().parents[1]

WRITER = """
import sys, time
from pathlib import Path
from pipeline.base.files import atomic_path, replace_dir
target = Path(sys.argv[2])
if sys.argv[1] == "file":
    with atomic_path(target) as tmp:
        tmp.write_bytes(b"half")
        print("ready", flush=True)
        time.sleep(60)
else:
    def build(tmp):
        (tmp / "vectors.npy").write_bytes(b"half")
        print("ready", flush=True)
        time.sleep(60)
    replace_dir(target, build)
"""


def killed_writer(kind: str, target: Path, reaped: bool = True) -> subprocess.Popen:
    """Start a process writing `target` atomically, kill -9 it mid-write. reaped=False: left a zombie, as under
    a container init that does not reap orphans (its /proc entry and pid stay)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, kind, str(target)], cwd=REPO, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout.readline().strip() == "ready"
    proc.send_signal(signal.SIGKILL)
    if reaped:
        proc.wait(60)  # guards a hang: SIGKILL takes milliseconds when the machine is quiet
    else:
        deadline = time.monotonic() + 60  # guards a hang: SIGKILL takes milliseconds when the machine is quiet
        while psutil.Process(proc.pid).status() != psutil.STATUS_ZOMBIE:
            assert time.monotonic() < deadline
            time.sleep(0.01)
    return proc


@pytest.mark.parametrize("reaped", [True, False], ids=["reaped", "zombie"])
@pytest.mark.parametrize("kind", ["file", "dir"])
def test_killed_writer_leaves_a_marked_temporary_that_the_next_run_removes(tmp_path, kind, reaped):
    data = tmp_path / "data"
    target = data / ("tokens.json" if kind == "file" else "glove")
    proc = killed_writer(kind, target, reaped)
    pid = proc.pid
    [left] = [p for p in data.iterdir()]
    assert left.name.startswith(temp_prefix(target.name).replace(str(os.getpid()), str(pid)))
    assert not target.exists()  # the killed write never reached the target
    mine = data / f"{temp_prefix('other')}x.tmp"  # a live process's work in progress (this one's) stays
    mine.write_bytes(b"in progress")
    removed = clean_stale_temporaries([data])
    assert removed == [left] and sorted(p.name for p in data.iterdir()) == [mine.name]
    proc.wait(10)


def test_other_hosts_and_foreign_names_are_left_alone(tmp_path):
    """A temporary of another host (shared file system: its process may be alive there) and files that merely look
    similar are not touched."""
    keep = [tmp_path / f"{TEMP_MARK}otherhost.1.glove.abc", tmp_path / ".glove.txt", tmp_path / f"{TEMP_MARK}bad"]
    for path in keep:
        path.write_text("x")
    assert clean_stale_temporaries([tmp_path]) == []
    assert all(path.exists() for path in keep)


def test_dvc_s_temporaries_are_removed_only_when_no_dvc_runs(tmp_path):
    """DVC's own temporaries (dvc_objects' tmp_fname: a link test's, a copy's) carry no pid: they go only when the
    caller knows no DVC runs in the workspace (pipeline.repro before it starts DVC); look-alikes and folders stay."""
    from dvc_objects.fs.utils import tmp_fname

    dvc = [tmp_path / tmp_fname(), tmp_path / "figures" / tmp_fname("pe_norms.png")]
    keep = [tmp_path / "notes.tmp", tmp_path / ".short.tmp", tmp_path / "figures" / "a.png"]
    for path in dvc + keep:
        path.parent.mkdir(exist_ok=True)
        path.write_text("x")
    (tmp_path / tmp_fname("folder")).mkdir()
    assert clean_stale_temporaries([tmp_path]) == [] and all(path.exists() for path in dvc)
    assert sorted(clean_stale_temporaries([tmp_path], dvc_idle=True)) == sorted(dvc)
    assert all(path.exists() for path in keep) and not any(path.exists() for path in dvc)
    assert len(list(tmp_path.glob("folder.*.tmp"))) == 1


def test_temporaries_are_git_ignored_wherever_they_land(tmp_path):
    """The names atomic_path, replace_dir and the zip extraction use, in data/, data/cache/ and reports/, and DVC's
    own beside the outputs, are ignored by the project's .gitignore (checked by git itself)."""
    from dvc_objects.fs.utils import tmp_fname

    names = [
        f"reports/{tmp_fname()}",
        f"data/{tmp_fname('tokens')}",
        f"data/{temp_prefix('tokens.json')}abc.tmp",
        f"data/cache/{temp_prefix('glove-member')}x.txt",
        f"data/{temp_prefix('glove')}xyz/vectors.npy",
        f"reports/{temp_prefix('figures')}q/pe_norms.png",
        f"reports/plots/{temp_prefix('pe_norms.csv')}r.tmp",
    ]
    result = subprocess.run(["git", "check-ignore", "--no-index", *names], cwd=REPO, capture_output=True, text=True)
    assert sorted(result.stdout.split()) == sorted(names), result.stderr


def test_atomic_path_and_replace_dir_use_the_marked_names(tmp_path):
    seen = []
    with atomic_path(tmp_path / "a.json") as tmp:
        seen.append(tmp.name)
        tmp.write_text("{}")
    replace_dir(tmp_path / "store", lambda tmp: seen.append(tmp.name))
    replace_dir(tmp_path / "store", lambda tmp: seen.append(tmp.name))  # the swap's ".old" too
    assert all(name.startswith(TEMP_MARK) for name in seen)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json", "store"]


def test_a_stage_run_cleans_a_killed_runs_leftovers(tmp_path):
    """`python -m pipeline.stages.<name>` (what dvc repro runs) removes a dead process's temporaries first."""
    from conftest import copy_checkout, run

    project = copy_checkout(tmp_path / "project")
    run([sys.executable, "-m", "pipeline.compose"], project)
    pid = killed_writer("dir", project / "reports" / "figures").pid
    stale = [p for p in (project / "reports").iterdir() if p.name.startswith(TEMP_MARK)]
    assert len(stale) == 1 and f".{pid}." in stale[0].name
    status = subprocess.run(["git", "status", "--porcelain"], cwd=project, capture_output=True, text=True).stdout
    assert TEMP_MARK not in status
    run([sys.executable, "-m", "pipeline.stages.tokenize"], project)
    assert not stale[0].exists()
