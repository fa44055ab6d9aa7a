"""`python -m benchmarks.suite_cpu`: every Python process of a pytest run logs its CPU at exit, forked ones too, and
the tables add them up by kind and by test file."""

from __future__ import annotations

import json
import sys

from conftest import REPO, run

TEST_FILE = """
import os, subprocess, sys

def test_starts_a_process_and_forks():
    subprocess.run([sys.executable, "-c", "sum(range(10**6))"], check=True)
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    assert os.waitpid(pid, 0)[1] == 0
"""


def test_every_process_of_a_run_is_counted_by_kind_and_file(tmp_path):
    (tmp_path / "test_sample.py").write_text(TEST_FILE, encoding="utf-8")
    log = tmp_path / "cpu.jsonl"
    sample = [str(tmp_path / "test_sample.py"), "--rootdir", str(tmp_path), "-p", "no:xdist", "-p", "no:cacheprovider"]
    args = ["--log", str(log), "--", *sample]
    result = run([sys.executable, "-m", "benchmarks.suite_cpu", *args], REPO)
    assert "pytest exited 0 after" in result.stdout
    records = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    assert sorted(record["kind"] for record in records) == ["forked from pytest", "pytest", "python -c"]
    started = [record for record in records if record["kind"] != "pytest"]
    assert {record["test"] for record in started} == {"test_sample.py::test_starts_a_process_and_forks"}
    assert all(record["cpu_s"] >= 0 and record["wall_s"] >= 0 for record in records)
    total = sum(record["cpu_s"] for record in records)
    assert f"{total:9.1f} CPU-s in 3 Python processes" in result.stdout
    assert "  test_sample.py" in result.stdout  # the file's row: the two processes its test started

    again = run([sys.executable, "-m", "benchmarks.suite_cpu", "--report", "--log", str(log)], REPO)
    assert again.stdout.strip() in result.stdout
