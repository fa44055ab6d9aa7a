"""Forked workers never hang their command (pipeline.base.worker_pool): a stop that lands as the pool starts, a stop
sent to the whole process group while the workers start or while they wait for work, and a worker killed mid-task
(the OOM killer) each end the command within seconds, with its usual line, no traceback and no process left. With
multiprocessing.Pool the first, third and fourth waited forever: on the lock a killed worker held (in Pool.terminate()
or in its finalizer at exit), or on the result of the killed worker's task; a worker that the stop reaches before it
has set its own handlers printed a traceback. Each case runs in a process of its own, killed with its group if it
hangs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from conftest import REPO
from pipeline.base.processes import running

DRIVER = """
import os, signal, sys, time

import psutil

from pipeline.base import stops, worker_pool
from pipeline.base.errors import PipelineError

case = sys.argv[1]


def report():
    print(*sorted(child.pid for child in psutil.Process().children()), flush=True)


def die_at(item):
    if item == 3:
        time.sleep(1)  # the workers are listed first
        os.kill(os.getpid(), signal.SIGKILL)
    return item


def app():
    if case == "stop as the pool starts":
        start = worker_pool._start

        def start_then_stop(processes):
            workers = start(processes)
            report()
            os.kill(os.getpid(), signal.SIGTERM)  # lands before the batch's own cleanup can see the pool
            return workers

        worker_pool._start = start_then_stop
        with worker_pool.imap(abs, range(8), 2) as results:
            list(results)
    elif case == "stop to the group while the workers start":
        started = worker_pool._worker_start

        def slow_start(*args):
            time.sleep(1)  # the stop arrives before the worker has set its own handlers
            started(*args)

        worker_pool._worker_start = slow_start
        print("starting", flush=True)
        with worker_pool.pool(2):
            pass
    elif case == "stop to the group while the workers wait":
        with worker_pool.pool(2) as workers:
            report()
            time.sleep(120)  # the test sends SIGTERM to the group: the idle workers die with the stop
    else:  # a worker killed mid-task
        try:
            with worker_pool.imap(die_at, range(8), 2) as results:
                report()
                list(results)
        except PipelineError as exc:
            print(f"error: {exc}", file=sys.stderr)
            raise SystemExit(2) from None


stops.run_app(app)
"""


@pytest.mark.parametrize(
    "case",
    [
        "stop as the pool starts",
        "stop to the group while the workers start",
        "stop to the group while the workers wait",
        "a worker killed mid-task",
    ],
)
def test_workers_never_hang_their_command(case):
    driver = subprocess.Popen(
        [sys.executable, "-c", DRIVER, case],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        workers = [int(pid) for pid in driver.stdout.readline().split() if pid != "starting"]
        if case == "stop to the group while the workers start":
            deadline = time.monotonic() + 30
            while len(workers) < 2 and time.monotonic() < deadline:
                workers = [child.pid for child in psutil.Process(driver.pid).children()]
                time.sleep(0.01)  # the workers are forked within milliseconds; no need to spin a core meanwhile
            os.killpg(driver.pid, signal.SIGTERM)
        if case == "stop to the group while the workers wait":
            os.killpg(driver.pid, signal.SIGTERM)
        out, err = driver.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(driver.pid, signal.SIGKILL)
        driver.communicate()
        pytest.fail(f"{case}: the command hung")
    assert len(workers) == 2, (workers, err)
    if case == "a worker killed mid-task":
        assert driver.returncode == 2, err
        assert err.startswith("error: a worker process ended abruptly (killed: out of memory") and "Fix:" in err, err
    else:
        assert driver.returncode == 143, err
        assert err.startswith("interrupted by SIGTERM: stopped the run") and "Traceback" not in err, err
    deadline = time.monotonic() + 10
    while any(running(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(running(pid) for pid in workers), workers
