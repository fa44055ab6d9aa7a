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
