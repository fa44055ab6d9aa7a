"""Whether a process recorded by pid (in a temporary's name, a pending MLflow run, a workspace lock) still runs.

A pid alone does not say: a killed process can stay a zombie until its parent reaps it (a container whose
init does not reap keeps it forever), and pids are reused (pid_max is often 32768), so a live process with
that pid may be another program that started after the recorded one died. psutil reads both (Linux procfs,
macOS and Windows APIs alike).
"""

from __future__ import annotations

import ctypes
import signal
import sys

import psutil

# psutil dates a start from the boot time, which Linux gives in whole seconds: a start can read up to 1 s early
START_SLACK_S = 2.0


def running(pid: int, *, started_by: float | None = None) -> bool:
    """Whether `pid` is a live process (not a zombie) that may be the one recorded.

    started_by: epoch seconds at which the recorded process was known to run (e.g. the mtime of a file it
        wrote); a process that started later is a reuse of the pid, not the recorded one.
    """
    if not isinstance(pid, int) or pid <= 0:  # a record with no pid, or a damaged one
        return False
    try:
        process = psutil.Process(pid)
        if process.status() in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD):
            return False
        if started_by is not None and process.create_time() > started_by + START_SLACK_S:
            return False
        return True
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:  # another user's process: it exists, and nothing more can be told
        return True


def dying_with_parent():
    """A function that makes the process calling it get SIGKILL when its parent dies, even by kill -9 (Linux's
    PR_SET_PDEATHSIG; elsewhere it does nothing), resolved now, so that a forked child can call it before exec."""
    if not sys.platform.startswith("linux"):
        return lambda: None
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    return lambda: prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
