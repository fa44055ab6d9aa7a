"""The README's main commands, run in order on a fresh clone as a new user runs them (issue 44): each exits 0."""

from __future__ import annotations

import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from conftest import copy_project, run
from test_first_hour_round_two import readme_commands


def serve_until_linked(args: list[str], cwd: Path) -> str:
    """`python -m pipeline.server` on a free port (tests never take a fixed one): the runs link it prints, once the
    server answers there; then stopped with Ctrl-C's signal."""
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    server = subprocess.Popen(
        [*args, "--port", str(port)], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        seen = ""
        while (link := re.search(r"browse the runs of positional-encoding: (\S+)", seen)) is None:
            line = server.stdout.readline()
            assert line, f"the server ended before printing its link:\n{seen}"
            seen += line
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=30) as answer:
            assert answer.read() == b"OK"
        return link.group(1)
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(timeout=60)


@pytest.mark.slow  # the README's runs, a 6-job multirun and a DVC experiment: minutes
def test_the_readme_main_commands_run_in_order_on_a_fresh_clone(ran_project, tmp_path, monkeypatch):
    """The first command, `python -m pipeline.repro` on a fresh clone, is the run `ran_project` made (once for the
    suite, not again here, for speed: docs/benchmarks.md#the-test-suite); the others run in order in a copy of that
    clone, logging into the clone's own store."""
    monkeypatch.delenv("MLFLOW_TRACKING_URI")  # the clone's own store, as a user's
    first, *lines = readme_commands()
    source, ran, _ = ran_project
    assert first == "python -m pipeline.repro" and ran.returncode == 0, (ran.stdout[-3000:], ran.stderr[-3000:])
    assert "core.autostage" not in ran.stdout + ran.stderr  # runs leave files unstaged: no hint to stage them
    checkout = copy_project(source, tmp_path / "project")
    done = [first]
    for line in lines:
        args = shlex.split(line)
        if args[:3] == ["python", "-m", "pipeline.server"]:
            assert "workflowType=machine_learning" in serve_until_linked(args, checkout)
        else:
            result = run(args, checkout, check=False, timeout=1800)
            assert result.returncode == 0, (done, line, result.stdout[-3000:], result.stderr[-3000:])
            if args[:3] == ["python", "-m", "pipeline.repro"]:  # runs leave files unstaged: no hint to stage them
                assert "core.autostage" not in result.stdout + result.stderr, line
            if args[:2] == ["python", "-m"] and args[2] == "pipeline.experiments":
                assert "queen_king" in result.stdout and "[1, 2, 4]" in result.stdout
        done.append(line)
    assert len(done) == 9
    [summary] = (checkout / "outputs" / "multirun").glob("*/sweep_summary.png")  # the 6-job sweep's figure
    assert summary.stat().st_size > 0
