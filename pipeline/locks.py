"""A lock between processes of one machine, for one-time set-up that parallel jobs would race on.

Parallel Hydra jobs and DVC queue workers start at the same moment: without a lock, several of them
create the same fresh SQLite MLflow store (its schema migrations then fail: "Online migration
expected to match one row"), the same MLflow experiment, or the same GloVe store.
"""
from __future__ import annotations

import hashlib
import os
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from pipeline.errors import PipelineError

try:
    import fcntl
except ImportError:  # Windows: no flock; parallel set-up is not guarded there
    fcntl = None  # type: ignore[assignment]


def lock_path(key: str) -> Path:
    """The lock file for `key` (any string, e.g. a store URI), in the temp dir: nothing lands in the project."""
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    uid = os.getuid() if hasattr(os, "getuid") else 0
    return Path(tempfile.gettempdir()) / f"pe-pipeline-{uid}-{digest}.lock"


@contextmanager
def machine_lock(key: str, what: str, timeout: float = 600.0) -> Iterator[None]:
    """Hold an exclusive flock named by `key` for the block; wait at most `timeout` seconds.

    The kernel releases a flock when its holder dies, so a crashed job never leaves a stale lock.
    """
    if fcntl is None:
        yield
        return
    path = lock_path(key)
    with open(path, "a") as handle:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise PipelineError(f"waited {timeout:.0f} s for {what} (lock {path}): another process "
                                        "holds it. Fix: wait for that process or stop it.") from None
                time.sleep(0.05)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
