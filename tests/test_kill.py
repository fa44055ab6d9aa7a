"""Crash anywhere, lose nothing: `python -m pipeline.repro` SIGKILLed (its whole process group, as a power cut or
the OOM killer would) at random points of every stage, in a fresh copy of the project, then checked.

Kill points: a clean run first measures how long each stage's process lives; then each stage is re-run alone
(`pipeline.repro -- --force --single-item STAGE`) and killed at 3 points drawn at random in three strata of that
duration (start, middle, end; the last stratum reaches past the process's exit, into DVC's commit of the stage's
outputs and dvc.lock). Seeds: $PE_KILL_SEED (default KILL_SEEDS; `random` draws one, printed), points per stage:
$PE_KILLS_PER_STAGE (default 3). The kill hits the command's process group; dvc repro runs in a group of its own
and dies with the command (PR_SET_PDEATHSIG), its stages when they see the command gone.

After each kill: `mlflow.db` passes `PRAGMA integrity_check`; `git status --porcelain` shows no file changed or
added (every tracked output of the default config is byte-identical to the committed one, so a partial write
shows; an output DVC removed before re-running its stage may be missing). At the end one plain
`python -m pipeline.repro`: dvc.lock identical to the clean run's, `dvc status` up to date, git status clean, and
the same set of files in the workspace as after the clean run (no temporary of a killed run left behind).
"""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from conftest import run
from pipeline.stages.registry import STAGES as REGISTRY

pytestmark = pytest.mark.slow
# The draws of the suite, so that a run does not depend on luck: every seed that found a bug, each its own test.
# `PE_KILL_SEED=random` explores new points (docs/reliability.md); a seed that finds a bug is fixed, then added
# here. The kills behind the earlier fixes (a cut dvc.lock, an empty rwlock, a killed run's temporaries: 3c75c41,
# 866fcf2, bfffdf1) were random draws whose seeds were not printed then; 20261125 is the first seed kept.
KILL_SEEDS = (20261125,)
PY = sys.executable
STAGES = [stage.name for stage in REGISTRY]  # every stage of the registry, in DAG order
SKIP_DIRS = {".git", ".dvc/cache", ".dvc/tmp", "mlartifacts", "__pycache__"}


def group(sid: int) -> list[Path]:
    """/proc/<pid> of the live (not zombie) processes of session `sid` (the run, its dvc repro in a process group of
    its own, the stages and their workers)."""
    procs = []
    for proc in Path("/proc").iterdir():
        try:
            if (
                proc.name.isdigit()
                and os.getsid(int(proc.name)) == sid
                and (proc / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
            ):
                procs.append(proc)
        except (OSError, ProcessLookupError):
            continue
    return procs


def stage_of(sid: int) -> str | None:
    """The stage whose process (`python -m pipeline.stages.NAME`) runs in session `sid`, if any."""
    for proc in group(sid):
        try:
            args = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        for i, arg in enumerate(args[:-1]):
            if arg == b"-m" and args[i + 1].startswith(b"pipeline.stages."):
                return args[i + 1].decode().rsplit(".", 1)[1]
    return None


def start(checkout: Path, *args: str) -> subprocess.Popen:
    env = dict(os.environ, PATH=f"{Path(PY).parent}{os.pathsep}{os.environ['PATH']}")
    return subprocess.Popen(
        [PY, "-m", "pipeline.repro", *args],
        cwd=checkout,
        env=env,
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def timed_clean_run(checkout: Path) -> dict[str, float]:
    """Run the pipeline to its end; return how long each stage's process lived (s)."""
    proc = start(checkout)
    seen: dict[str, list[float]] = {}
    while proc.poll() is None:
        stage = stage_of(proc.pid)
        if stage:
            seen.setdefault(stage, [time.monotonic(), 0.0])[1] = time.monotonic()
        time.sleep(0.05)
    out = proc.stdout.read()
    assert proc.returncode == 0, out
    return {stage: max(end - begin, 0.2) for stage, (begin, end) in seen.items()}


def kill_in(checkout: Path, stage: str, duration: float, fraction: float) -> tuple[str, float | None]:
    """Re-run `stage` alone and SIGKILL the command's process group `fraction` of its duration after its process appears
    (fraction >= 1: after its process exits). Returns what was hit, and how long the stage's process lived if
    the run ended before the kill."""
    proc = start(checkout, "--", "--force", "--single-item", stage)
    deadline = time.monotonic() + 120  # guards a hang: DVC starts a stage within seconds when the machine is quiet
    while stage_of(proc.pid) != stage:
        if proc.poll() is not None:
            raise AssertionError(f"the run ended before stage {stage} started:\n{proc.stdout.read()}")
        assert time.monotonic() < deadline, f"stage {stage} never started"
        time.sleep(0.02)
    began = time.monotonic()
    lived = None
    until = began + fraction * duration if fraction < 1 else None
    while (until is None or time.monotonic() < until) and stage_of(proc.pid) == stage:
        time.sleep(0.02)
    if stage_of(proc.pid) != stage:  # the stage's process has exited: DVC saves its outputs, writes dvc.lock
        lived = time.monotonic() - began
        if until is None:
            time.sleep((fraction - 1) * 2.0)
    hit = "in the stage" if lived is None else "after the stage's process"
    if proc.poll() is not None:
        hit = "too late: the run had ended"
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()
    proc.stdout.close()
    deadline = time.monotonic() + 30  # guards a hang: SIGKILL takes milliseconds
    while group(proc.pid):  # its children (dvc, the stage) are gone too before anything looks at the workspace
        assert time.monotonic() < deadline, "processes of the killed run survived SIGKILL"
        time.sleep(0.02)
    return hit, lived


def integrity(db: Path) -> str:
    if not db.exists():
        return "ok"
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30) as conn:
        return conn.execute("PRAGMA integrity_check").fetchone()[0]


def unexpected_git_changes(checkout: Path) -> list[str]:
    """Lines of `git status --porcelain` other than a deleted file (an output DVC removed before its stage ran) and
    dvc.lock (DVC rewrites it in place: a kill can cut it short; the next `pipeline.repro` puts it back, which the
    run after each stage's kills checks)."""
    lines = run(["git", "status", "--porcelain"], checkout).stdout.splitlines()
    return [line for line in lines if not line.startswith(" D ") and line != " M dvc.lock"]


def workspace_files(checkout: Path) -> set[str]:
    files = set()
    for dirpath, dirnames, filenames in os.walk(checkout):
        rel = Path(dirpath).relative_to(checkout).as_posix()
        dirnames[:] = [
            d for d in dirnames if (f"{rel}/{d}" if rel != "." else d) not in SKIP_DIRS and d not in SKIP_DIRS
        ]
        files.update(f"{rel}/{f}" if rel != "." else f for f in filenames)
    return files


def kill_seeds() -> list[int]:
    """KILL_SEEDS, or $PE_KILL_SEED: one seed, a comma-separated list, or `random` (one drawn, printed)."""
    chosen = os.environ.get("PE_KILL_SEED")
    if not chosen:
        return list(KILL_SEEDS)
    return [random.SystemRandom().randrange(10**6) if s == "random" else int(s) for s in chosen.split(",")]


@pytest.mark.parametrize("seed", kill_seeds())
def test_kill_9_at_random_points_of_every_stage_loses_nothing(checkout, monkeypatch, seed):
    monkeypatch.delenv("MLFLOW_TRACKING_URI")  # the project's own store, <checkout>/mlflow.db, as a user has it
    per_stage = int(os.environ.get("PE_KILLS_PER_STAGE", "3"))
    rng = random.Random(seed)
    print(f"\nPE_KILL_SEED={seed}")

    durations = timed_clean_run(checkout)
    # a stage whose outputs are all git-tracked (study) is up to date in a fresh checkout: it runs when its
    # inputs change; every stage with a DVC-cached output runs in the clean run
    cached = {stage.name for stage in REGISTRY if any(output.cache for output in stage.outputs)}
    assert set(durations) >= cached, durations
    clean_lock = yaml.safe_load((checkout / "dvc.lock").read_text())
    clean_files = workspace_files(checkout)
    db = checkout / "mlflow.db"
    assert integrity(db) == "ok" and unexpected_git_changes(checkout) == []

    tried, problems = [], []
    for stage in STAGES:
        duration = durations.get(stage, 3.0)
        k = retries = 0
        while k < per_stage:
            # stratified: one point in each of `per_stage` equal slices of [0, 1.15) of the stage's duration
            fraction = (k + rng.random()) * 1.15 / per_stage
            hit, lived = kill_in(checkout, stage, duration, fraction)
            if hit.startswith("too late") and retries < 3:  # faster than in the clean run (e.g. the MLflow
                duration, retries = lived or duration / 2, retries + 1  # store's creation): aim again
                continue
            k += 1
            tried.append((stage, fraction, duration, hit))
            where = f"kill in {stage} at {fraction:.2f} of {duration:.1f} s ({hit})"
            print(f"  {where}")
            if (state := integrity(db)) != "ok":
                problems.append(f"{where}: mlflow.db integrity_check: {state}")
            if changes := unexpected_git_changes(checkout):
                problems.append(f"{where}: git status: {changes}")
        # the next plain run heals: the clean run's dvc.lock, nothing left behind
        healed = start(checkout)
        out, _ = healed.communicate(timeout=600)
        where = f"the run after the kills in {stage}"
        if healed.returncode != 0:
            problems.append(f"{where} failed:\n{out[-3000:]}")
            continue
        if yaml.safe_load((checkout / "dvc.lock").read_text()) != clean_lock:
            problems.append(f"{where}: dvc.lock differs from the clean run's")
        if "up to date" not in run(["dvc", "status"], checkout).stdout:
            problems.append(f"{where}: dvc status is not up to date")
        if status := run(["git", "status", "--porcelain"], checkout).stdout.splitlines():
            problems.append(f"{where}: git status: {status}")
        if (state := integrity(db)) != "ok":
            problems.append(f"{where}: mlflow.db integrity_check: {state}")
        now = workspace_files(checkout)
        if now != clean_files:
            problems.append(f"{where}: left behind {sorted(now - clean_files)}, missing {sorted(clean_files - now)}")

    with sqlite3.connect(db) as conn:
        statuses = dict(conn.execute("SELECT status, count(*) FROM runs GROUP BY status").fetchall())
    failed_stages = {p.split(" ")[2] if p.startswith("kill") else p.split(" in ")[1].split(":")[0] for p in problems}
    print(
        f"{len(tried)} kills (seed {seed}, {per_stage} per stage); stages with a problem: {sorted(failed_stages)}; "
        f"MLflow runs by status: {statuses}"
    )
    assert not problems, "\n".join(problems)
    # the clean run's; a killed run's results are put back, and the MLflow run it had logged, FINISHED or not, is
    # ended FAILED (the final run re-runs nothing: the workspace is the clean run's)
    assert statuses.get("FINISHED", 0) >= 1
