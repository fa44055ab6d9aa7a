"""Loaded at the start of every Python process while `python -m benchmarks.suite_cpu` runs the tests (this folder is
first on PYTHONPATH): at its exit each process, and each forked child at its `os._exit`, appends one JSON line to
$PE_SUITE_CPU_LOG with its own CPU time (user + system), its wall time, what it is (`kind`), the test that started it
($PYTEST_CURRENT_TEST) and which heavy libraries it had loaded. A process killed by a signal writes nothing. It
shadows any other sitecustomize module while the tool runs."""

import atexit
import json
import os
import resource
import sys
import time

_LOG = os.environ.get("PE_SUITE_CPU_LOG")
_LIBRARIES = ("torch", "mlflow", "matplotlib", "hydra", "dvc", "numpy")
_started = time.monotonic()
_forked_from = ""
_exit_now = os._exit  # the real one, also in a child forked from a forked child


def _kind() -> str:
    """What this process is: pytest, a stage, pipeline.repro, dvc, an MLflow server... (its command line)."""
    args = [a.replace(os.sep, "/") for a in sys.argv]
    first = args[0] if args else ""
    if "_pytest.main" in sys.modules and not _forked_from:
        # xdist's worker is started by execnet as `python -c` (a test's own `python -c` may import pytest too)
        if first == "-c" and "execnet" in sys.modules:
            return "pytest worker"
        if first.endswith(("/pytest/__main__.py", "/pytest", "/py.test")):
            return "pytest"
    if "/pipeline/" in first:  # python -m pipeline.stages.encode, pipeline.repro, pipeline (the Hydra app)...
        module = first.rsplit("/pipeline/", 1)[1].removesuffix(".py").removesuffix("/__main__").replace("/", ".")
        return "pipeline (Hydra app)" if module == "__main__" else f"pipeline.{module}"
    if first.endswith(("/dvc", "/dvc/__main__.py")) or (first == "-c" and "dvc.cli" in sys.modules):
        return "dvc"
    if "mlflow" in " ".join(args[:3]) and "server" in " ".join(args):
        return "MLflow server"
    return "python -c" if first == "-c" else first.rsplit("/", 1)[-1] or "python"


def _write() -> None:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    kind = f"forked from {_forked_from}" if _forked_from else _kind()
    record = {
        "kind": kind,
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 3),
        "wall_s": round(time.monotonic() - _started, 3),
        "test": os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" (", 1)[0],
        "libraries": [name for name in _LIBRARIES if name in sys.modules],
    }
    try:
        with open(_LOG, "a", encoding="utf-8") as log:  # one short append: whole lines from many processes
            log.write(json.dumps(record) + "\n")
    except OSError:
        pass


def _in_child() -> None:
    """A forked child: its own clock, and a record at os._exit, which skips atexit."""
    global _started, _forked_from
    _forked_from, _started = _kind(), time.monotonic()

    def _exit(code: int) -> None:
        _write()
        _exit_now(code)

    os._exit = _exit


if _LOG:
    atexit.register(_write)
    os.register_at_fork(after_in_child=_in_child)
