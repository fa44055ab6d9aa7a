"""pipeline.base.processes.running: live processes only, not zombies, not a pid reused by a later program."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from pipeline.base.processes import START_SLACK_S, running


@pytest.fixture
def sleeper():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "dvc"])
    deadline = time.monotonic() + 60  # guards a hang: exec takes milliseconds when the machine is quiet
    while "dvc" not in psutil.Process(proc.pid).cmdline():  # until it has exec'd
        assert time.monotonic() < deadline
        time.sleep(0.01)
    yield proc
    proc.kill()
    proc.wait()


def test_a_live_process_runs_and_a_reaped_one_does_not(sleeper):
    assert running(os.getpid()) and running(sleeper.pid)
    sleeper.kill()
    sleeper.wait()
    assert not running(sleeper.pid)


def test_a_zombie_does_not_run(sleeper):
    sleeper.send_signal(signal.SIGKILL)  # not reaped: its pid and /proc entry stay, and os.kill(pid, 0) succeeds
    deadline = time.monotonic() + 60  # guards a hang: SIGKILL takes milliseconds when the machine is quiet
    while psutil.Process(sleeper.pid).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    os.kill(sleeper.pid, 0)
    assert not running(sleeper.pid)


def test_a_process_started_after_the_record_is_a_reused_pid(sleeper):
    started = psutil.Process(sleeper.pid).create_time()
    assert running(sleeper.pid, started_by=started)
    assert running(sleeper.pid, started_by=started - START_SLACK_S / 2)  # within the boot-time rounding
    assert not running(sleeper.pid, started_by=started - START_SLACK_S - 1)  # wrote its file before it started


@pytest.mark.parametrize("pid", [-1, 0, None, "12"])
def test_damaged_records_do_not_run(pid):
    assert not running(pid)
