"""pipeline.repro heals DVC's output lock after a kill -9: a truncated .dvc/tmp/rwlock is removed, entries of
dead (or reused, non-DVC) pids are dropped, and a live DVC process's entries are kept."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from pipeline.base.processes import running
from pipeline.repro import heal_dvc_rwlock


@pytest.mark.parametrize(
    "content",
    ['{"read": {"data/glove": [{"pid": 1, "cmd": "dvc repro"}], "wri', "", "  \n", "[]"],
    ids=["cut", "empty", "blank", "not an object"],
)
def test_truncated_lock_file_is_removed(tmp_path, content):
    """What DVC refuses to read ("JSON structure is corrupted"), an empty file included (a kill right after DVC
    opened it for writing), is removed: DVC makes a new one."""
    lock = tmp_path / "rwlock"
    lock.write_text(content)
    heal_dvc_rwlock(lock)
    assert not lock.exists()


def test_entries_of_dead_or_foreign_pids_are_dropped_live_dvc_kept(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    # a live process whose command line names dvc stands for a running DVC; this test's own pid is not DVC's
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "dvc"])
    try:
        deadline = time.monotonic() + 10
        while not running(live.pid, program="dvc"):  # until the child has exec'd (before, /proc shows our own command)
            assert time.monotonic() < deadline
            time.sleep(0.01)
        lock = tmp_path / "rwlock"
        info = {
            "read": {
                "data/tokens": [{"pid": dead.pid, "cmd": "dvc repro"}, {"pid": live.pid, "cmd": "dvc repro"}],
                "data/glove": [{"pid": os.getpid(), "cmd": "dvc repro"}],
            },
            "write": {
                "data/encode": {"pid": dead.pid, "cmd": "dvc repro"},
                "data/sweep": {"pid": live.pid, "cmd": "dvc repro"},
            },
        }
        lock.write_text(json.dumps(info))
        heal_dvc_rwlock(lock)
        assert json.loads(lock.read_text()) == {
            "read": {"data/tokens": [{"pid": live.pid, "cmd": "dvc repro"}]},
            "write": {"data/sweep": {"pid": live.pid, "cmd": "dvc repro"}},
        }
        before = lock.read_bytes()
        heal_dvc_rwlock(lock)  # nothing to heal: left as it is
        assert lock.read_bytes() == before
    finally:
        live.kill()
        live.wait()


def test_truncated_dvc_lock_is_put_back_from_git(tmp_path):
    from pipeline.repro import heal_dvc_lock

    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    (tmp_path / "dvc.yaml").write_text("stages:\n  a:\n    cmd: python -m x\n  b:\n    cmd: python -m y\n")
    good = "schema: '2.0'\nstages:\n  a:\n    cmd: python -m x\n  b:\n    cmd: python -m y\n"
    (tmp_path / "dvc.lock").write_text(good)
    subprocess.run(["git", "add", "dvc.lock"], cwd=tmp_path, check=True)
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x"], cwd=tmp_path, check=True)
    (tmp_path / "dvc.lock").write_text(good.split("  b:")[0])  # cut between stages: still valid YAML
    heal_dvc_lock(tmp_path)
    assert (tmp_path / "dvc.lock").read_text() == good
    (tmp_path / "dvc.lock").write_text(good + "    deps:\n    - path: data/x\n")  # cut before the hash
    heal_dvc_lock(tmp_path)
    assert (tmp_path / "dvc.lock").read_text() == good
    heal_dvc_lock(tmp_path)  # a valid file is left alone
    assert (tmp_path / "dvc.lock").read_text() == good
