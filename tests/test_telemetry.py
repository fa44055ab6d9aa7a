"""MLflow's usage telemetry is off in every process the project starts, unless the user turned it on."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from conftest import REPO

# what a child reports: the variable, what MLflow reads from it, and what a grandchild (a stage of `dvc repro`, the
# `mlflow server` of pipeline.server) inherits
PROBE = (
    "import os, subprocess, sys, pipeline\n"
    "from mlflow.environment_variables import MLFLOW_DISABLE_TELEMETRY\n"
    "child = subprocess.run([sys.executable, '-c', 'import os; print(os.environ.get(\"MLFLOW_DISABLE_TELEMETRY\"))'],"
    " capture_output=True, text=True).stdout.strip()\n"
    "print(os.environ.get('MLFLOW_DISABLE_TELEMETRY'), MLFLOW_DISABLE_TELEMETRY.get(), child)\n"
)


def clean_env(**env: str) -> dict:
    """The environment without the user's telemetry settings, plus `env`."""
    base = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_DISABLE_TELEMETRY", "DO_NOT_TRACK")}
    return {**base, **env}


@pytest.mark.parametrize(
    "env, expected",
    [({}, "true True true"), ({"MLFLOW_DISABLE_TELEMETRY": "false"}, "false False false")],
)
def test_telemetry_is_off_unless_the_user_turned_it_on(env, expected):
    """Importing pipeline (what every entry point does) disables it for the process and its children; a user's own
    MLFLOW_DISABLE_TELEMETRY=false is kept."""
    result = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=REPO, env=clean_env(**env), capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == expected.split()


@pytest.mark.slow
def test_mlflow_server_child_has_telemetry_off(tmp_path):
    """`python -m pipeline.server` runs `mlflow server` as its child: that process's environment says so."""
    from test_mlflow_server import free_port

    # stopped as soon as its `mlflow server` child exists, before it serves anything
    proc = subprocess.Popen(
        [sys.executable, "-m", "pipeline.server", "--port", str(free_port()), "--workers", "1"]
        + ["--backend-store-uri", f"sqlite:///{tmp_path / 'mlflow.db'}"],
        cwd=REPO,
        env=clean_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        # guards a hang: python -m pipeline.server starts mlflow within a second or two when the machine is quiet
        deadline, environ = time.monotonic() + 60, b""
        while time.monotonic() < deadline and proc.poll() is None and not environ:
            for child in psutil.Process(proc.pid).children():
                try:
                    if child.cmdline()[1:4] == ["-m", "mlflow", "server"]:
                        environ = Path(f"/proc/{child.pid}/environ").read_bytes()
                except (psutil.Error, OSError):
                    continue
            time.sleep(0.05)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    assert b"MLFLOW_DISABLE_TELEMETRY=true" in environ.split(b"\0"), "pipeline.server never started mlflow server"
