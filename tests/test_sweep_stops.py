"""Every stop of a Hydra multirun is clean (issue 33): SIGINT, SIGTERM or SIGHUP to a sweep, whatever its launcher
(basic, joblib, submitit), stops every process it started (no orphan), ends the sweep's parent run and the job runs
left RUNNING as KILLED, and prints one line, no traceback.

Before: SIGTERM to a joblib multirun exited 143 without a word and left two loky workers and two resource trackers
running for good (a worker then logged a child run after the parent run was marked FAILED); SIGTERM to a basic
multirun printed four BrokenPipeError tracebacks and left the parent run RUNNING until the next sweep.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from conftest import REPO, processes_in

pytestmark = pytest.mark.slow
PY = sys.executable


def running_job(root: Path) -> bool:
    """Whether a job of the sweep under `root` says it runs (its job_result.json)."""
    for path in (root / "outputs" / "multirun").glob("*/*/job_result.json"):
        try:
            if json.loads(path.read_text())["status"] == "running":
                return True
        except (OSError, ValueError, KeyError):
            continue
    return False


@pytest.mark.parametrize(
    "launcher, signame, to_group",
    [
        ("basic", "SIGTERM", False),  # was: four BrokenPipeError tracebacks, the parent run RUNNING
        ("basic", "SIGINT", True),  # Ctrl-C in a terminal: the whole process group
        ("parallel", "SIGTERM", False),  # joblib: was exit 143 silently, four processes left for good
        ("submitit_local", "SIGHUP", False),  # a closed terminal; submitit's jobs trap SIGTERM
    ],
)
def test_a_stopped_sweep_leaves_no_process_and_no_running_run(
    checkout, private_mlflow_store, launcher, signame, to_group
):
    from mlflow.tracking import MlflowClient

    store = private_mlflow_store
    env = dict(os.environ, PATH=f"{Path(PY).parent}{os.pathsep}{os.environ['PATH']}", MLFLOW_TRACKING_URI=store)
    sweep = subprocess.Popen(
        [PY, "-m", "pipeline", "-m", f"hydra/launcher={launcher}", "sweep.w2=1,2,3,4", "figures=summary"],
        cwd=checkout,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 300
        while not running_job(checkout) and sweep.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert sweep.poll() is None, sweep.communicate()
        time.sleep(2.0)  # into the job's work
        number = getattr(signal, signame)
        (os.killpg if to_group else os.kill)(sweep.pid, number)
        out, err = sweep.communicate(timeout=120)
    finally:
        if sweep.poll() is None:
            os.killpg(sweep.pid, signal.SIGKILL)
    assert sweep.returncode == 128 + number, err
    lines = [line for line in err.splitlines() if line.startswith(("interrupted", "Traceback", "error"))]
    assert len(lines) == 1 and lines[0].startswith(f"interrupted by {signame}: stopped the run"), err
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
    assert "parent run" in lines[0] and "ended KILLED" in lines[0], lines[0]
    deadline = time.monotonic() + 10
    while processes_in(checkout) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert processes_in(checkout) == []
    client = MlflowClient(store)
    runs = client.search_runs([client.get_experiment_by_name("positional-encoding").experiment_id])
    statuses = {run.info.run_name: run.info.status for run in runs}
    parents = [run for run in runs if run.info.run_name.startswith("sweep ")]
    assert len(parents) == 1 and parents[0].info.status == "KILLED", statuses
    assert "RUNNING" not in statuses.values(), statuses
    time.sleep(3)  # nothing is logged after the stop (before: a worker logged a child run after the parent ended)
    assert len(client.search_runs([parents[0].info.experiment_id])) == len(runs)


def test_figure_workers_leave_ctrl_c_to_their_parent():
    """A forked figure worker ignores SIGINT (a terminal's Ctrl-C reaches the whole group: each worker printed a
    traceback) and ends at once on SIGTERM."""
    from pipeline.base import worker_pool

    with worker_pool.pool(1) as workers:
        handlers = workers.submit(_handlers).result()
    assert handlers == (int(signal.SIG_IGN), int(signal.SIG_DFL))


def _handlers() -> tuple[int, int]:
    return int(signal.getsignal(signal.SIGINT)), int(signal.getsignal(signal.SIGTERM))


def test_end_descendants_stops_children_that_trap_sigterm(tmp_path):
    """A child that traps SIGTERM (as submitit's job runner does) and its own child: both gone, SIGKILL after the wait."""
    from pipeline.base.stops import end_descendants

    script = (
        "import signal, subprocess, sys, time; signal.signal(signal.SIGTERM, lambda *a: None); "
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)']); print('up', flush=True); "
        "time.sleep(600)"
    )
    child = subprocess.Popen([PY, "-c", script], stdout=subprocess.PIPE, text=True, cwd=REPO)
    assert child.stdout.readline().strip() == "up"
    processes = [psutil.Process(child.pid), *psutil.Process(child.pid).children()]
    start = time.monotonic()
    assert end_descendants(wait=1.0) >= 2
    assert time.monotonic() - start >= 1.0  # SIGTERM was not enough: SIGKILL after the wait
    for process in processes:
        assert not process.is_running() or process.status() == psutil.STATUS_ZOMBIE
