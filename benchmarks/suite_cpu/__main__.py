"""Where the test suite's CPU goes: `python -m benchmarks.suite_cpu [--log FILE] [-- PYTEST ARGS]` runs
`python -m pytest` with every Python process it starts logging its own CPU time at exit (sitecustomize.py in this
folder), then prints the CPU by kind of process (the xdist workers, each stage, DVC, pipeline.repro, MLflow servers,
forked figure workers...) and by test file. docs/benchmarks.md#where-the-full-suites-cpu-goes holds its results."""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

HOOK = Path(__file__).resolve().parent  # holds sitecustomize.py


def run_suite(log: Path, pytest_args: list[str]) -> tuple[int, float, float]:
    """`python -m pytest pytest_args` with every Python process logging to `log`; (exit status, wall s, CPU s of
    every process it started, as the kernel counts them: those a test killed included)."""
    path = os.pathsep.join(filter(None, [str(HOOK), os.environ.get("PYTHONPATH")]))
    env = dict(os.environ, PYTHONPATH=path, PE_SUITE_CPU_LOG=str(log))
    began, before = time.monotonic(), resource.getrusage(resource.RUSAGE_CHILDREN)
    status = subprocess.call([sys.executable, "-m", "pytest", *pytest_args], env=env)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return status, time.monotonic() - began, cpu


def read_log(log: Path) -> list[dict]:
    """The records of a log: one JSON object a line."""
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]


def tables(records: list[dict]) -> str:
    """CPU-s and process counts by kind, then by the test file that started them (the xdist workers' own CPU, the
    tests run in them, is theirs, not a file's)."""
    by_kind: dict[str, list[float]] = defaultdict(list)
    by_file: dict[str, list[float]] = defaultdict(list)
    for record in records:
        by_kind[record["kind"]].append(record["cpu_s"])
        if record["test"] and not record["kind"].startswith("pytest"):
            by_file[record["test"].split("::", 1)[0]].append(record["cpu_s"])
    total = sum(record["cpu_s"] for record in records)
    lines = [f"{total:9.1f} CPU-s in {len(records)} Python processes that exited (a killed process logs nothing)"]
    for title, groups in (("by kind of process", by_kind), ("by the test file that started them", by_file)):
        lines += ["", f"{'CPU-s':>9} {'share':>6} {'count':>6}  {title}"]
        for name, cpus in sorted(groups.items(), key=lambda item: -sum(item[1])):
            lines.append(f"{sum(cpus):9.1f} {sum(cpus) / total:6.1%} {len(cpus):6d}  {name}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.suite_cpu", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--log", type=Path, help="the JSON-lines log (default: a new temporary file)")
    parser.add_argument("--report", action="store_true", help="print the tables of an existing --log; run nothing")
    parser.add_argument("pytest_args", nargs="*", help="after --: what `python -m pytest` gets (default: nothing)")
    args = parser.parse_args(argv)
    if args.report:
        if args.log is None or not args.log.is_file():
            parser.error("--report needs --log FILE, a log that a run wrote")
        print(tables(read_log(args.log)))
        return 0
    log = args.log
    if log is None:
        descriptor, name = tempfile.mkstemp(prefix="suite-cpu-", suffix=".jsonl")
        os.close(descriptor)  # the processes append to it by name
        log = Path(name)
    log.write_text("", encoding="utf-8")
    status, wall, cpu = run_suite(log, args.pytest_args)
    print(f"\npytest exited {status} after {wall:.1f} s of wall time and {cpu:.1f} CPU-s (every process it started)")
    print(tables(read_log(log)))
    print(f"\nthe log: {log}")
    return status


if __name__ == "__main__":
    sys.exit(main())
