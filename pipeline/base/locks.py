"""A lock between processes of one machine (filelock), for one-time set-up that parallel jobs would race on.

Parallel Hydra jobs and DVC queue workers start at the same moment: without a lock, several of them
create the same fresh SQLite MLflow store (its schema migrations then fail: "Online migration
expected to match one row"), the same MLflow experiment, or the same GloVe store. The lock file lives
in the temp dir, named by a hash of the key, so nothing lands in the project; the OS releases the
lock when its holder dies, so a crashed job never leaves a stale one.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from pipeline.base.errors import PipelineError


def lock_path(key: str) -> Path:
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    uid = os.getuid() if hasattr(os, "getuid") else 0
    return Path(tempfile.gettempdir()) / f"pe-pipeline-{uid}-{digest}.lock"


@contextmanager
def machine_lock(key: str, what: str, timeout: float = 600.0) -> Iterator[None]:
    """Hold an exclusive lock named by `key` (any string, e.g. a store URI) for the block; wait at most `timeout` s."""
    from filelock import FileLock, Timeout

    path = lock_path(key)
    try:
        with FileLock(path, timeout=timeout):
            yield
    except Timeout:
        raise PipelineError(
            f"waited {timeout:.0f} s for {what} (lock {path}): another process holds it. "
            "Fix: wait for that process or stop it."
        ) from None


# The one writer of a workspace. Every command that writes it (pipeline.repro, pipeline.compose, a DVC stage run by
# a plain `dvc repro` or `dvc exp run`) holds this lock; a second one fails at once with one message naming the
# holder, as git does with index.lock and DVC with its own lock. The processes a holder starts (dvc repro, its
# stages) run inside its lock: they find the holder's pid in WORKSPACE_LOCK_ENV. The OS releases the lock when its
# holder dies, so a killed run never leaves a stale one.
WORKSPACE_LOCK_ENV = "PE_WORKSPACE_LOCK"
_held: set[Path] = set()  # workspaces this process holds (a holder's nested calls do not lock again)


def workspace_lock_paths(root: Path) -> tuple[Path, Path]:
    """(the lock file, the holder's record) of the workspace at `root`: beside DVC's own locks, git-ignored."""
    folder = Path(root) / ".dvc" / "tmp"
    return folder / "pe-workspace.lock", folder / "pe-workspace.json"


def workspace_holder() -> int | None:
    """The pid whose run the current process works for, when it was started inside a holder's lock."""
    value = os.environ.get(WORKSPACE_LOCK_ENV, "")
    return int(value) if value.isdigit() and int(value) != os.getpid() else None


def _holder(record_path: Path) -> tuple[str, str]:
    """(what holds the lock, how to stop it) from the holder's record."""
    import json
    import time

    try:
        record = json.loads(record_path.read_text(encoding="utf-8"))
        started = time.strftime("%H:%M:%S", time.localtime(record["started"]))
        return f"pid {record['pid']}, `{record['command']}`, started at {started}", f"kill {record['pid']}"
    except (OSError, ValueError, KeyError, TypeError):
        return "a process that has not said what it runs yet", "kill PID"


@contextmanager
def workspace_lock(root: Path, command: str) -> Iterator[None]:
    """Hold the workspace lock of `root` for the block, or raise PipelineError at once if another process has it.

    command: what this process runs, shown to the process that finds the workspace in use."""
    import json
    import time

    from filelock import FileLock, Timeout

    root = Path(root).resolve()
    if root in _held:
        yield
        return
    lock_file, record_path = workspace_lock_paths(root)
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(lock_file, blocking=False)
    try:
        lock.acquire()
    except Timeout:
        holder, stop = _holder(record_path)
        raise PipelineError(
            f"the workspace {root} is in use by another run ({holder}): one run at a time writes params.yaml, "
            "dvc.lock, data/ and reports/. Nothing was changed. Fix: wait for that run to finish (or stop it with "
            f"Ctrl-C or `{stop}`: it puts the workspace back), then run again."
        ) from None
    previous = os.environ.get(WORKSPACE_LOCK_ENV)
    try:
        record = {"pid": os.getpid(), "command": command, "started": time.time()}
        record_path.write_text(json.dumps(record), encoding="utf-8")
        _held.add(root)
        os.environ[WORKSPACE_LOCK_ENV] = str(os.getpid())  # the processes it starts work inside this lock
        yield
    finally:
        _held.discard(root)
        if previous is None:
            os.environ.pop(WORKSPACE_LOCK_ENV, None)
        else:
            os.environ[WORKSPACE_LOCK_ENV] = previous
        record_path.unlink(missing_ok=True)
        lock.release()
