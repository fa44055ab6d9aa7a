"""Concurrency: 8 writers at once into one MLflow store, as a team or a busy machine has them: a Hydra sweep of 4
parallel jobs (hydra/launcher=parallel, n_jobs=4) and 4 `python -m pipeline.repro` in 4 separate clones, all
started together, logging into one SQLite file, then into one `python -m pipeline.server`. Every run must arrive,
finished, and no "database is locked" may reach the user."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import copy_project, run
from test_mlflow_server import Server
from test_sweeps import runs_by_kind

pytestmark = pytest.mark.slow
PY = sys.executable
CLONES = 4
JOBS = 4
LOCKED = ("database is locked", "OperationalError")


@pytest.fixture(scope="module")
def clones(ran_project, tmp_path_factory, empty_mlflow_store) -> list[Path]:
    """CLONES + 1 copies of the project that have run with figures=none (into a throwaway store): a writer then
    recomputes only the stages its override changes (sweep, figures), which keeps 8 writers affordable (from the
    default run, each would run encode again too: figures.name is one of its params). No figure is drawn: what is
    tested is the store under 8 writers' params, metrics, artifacts (the report page, the data) and statuses; drawing
    is the figure tests' concern."""
    base = tmp_path_factory.mktemp("concurrency")
    first = copy_project(ran_project[0], base / "clone0")
    shutil.copyfile(empty_mlflow_store, base / "setup.db")  # MLflow's tables made once for the suite (conftest)
    run([PY, "-m", "pipeline.repro", "figures=none"], first, MLFLOW_TRACKING_URI=f"sqlite:///{base / 'setup.db'}")
    # the others: DVC outputs and cache hard-linked (they are replaced, never written in place), the rest copied
    return [first] + [
        copy_project(first, base / f"clone{i}", link=("data/", ".dvc/cache/")) for i in range(1, CLONES + 1)
    ]


def eight_writers(clones: list[Path], uri: str, tag: str) -> list[tuple[str, subprocess.CompletedProcess]]:
    """Start the sweep (in clone 0) and the repros (clones 1..CLONES) together; return (what, result) of each."""
    env = dict(os.environ, MLFLOW_TRACKING_URI=uri, PATH=f"{Path(PY).parent}{os.pathsep}{os.environ['PATH']}")
    points = ",".join(str(w) for w in range(2, 2 + JOBS))
    cmds = [
        (
            "sweep",
            clones[0],
            [
                PY,
                "-m",
                "pipeline",
                "-m",
                "hydra/launcher=parallel",
                f"hydra.launcher.n_jobs={JOBS}",
                f"sweep.w2={points}",
                "figures=none",
                f"hydra.sweep.dir=multirun_{tag}",
            ],
        )
    ]
    cmds += [
        (
            f"repro {i}",
            clone,
            [PY, "-m", "pipeline.repro", f"sweep.w2={10 + i + (0 if tag == 'sqlite' else 10)}", "figures=none"],
        )
        for i, clone in enumerate(clones[1:], 1)
    ]
    procs = [
        (what, subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        for what, cwd, cmd in cmds
    ]
    results = []
    for what, proc in procs:
        out, err = proc.communicate(timeout=900)
        results.append((what, subprocess.CompletedProcess(proc.args, proc.returncode, out, err)))
    return results


def check_all_arrived(results, uri: str) -> int:
    for what, result in results:
        log = result.stdout + result.stderr
        assert result.returncode == 0, f"{what}:\n{log[-4000:]}"
        assert not any(word in log for word in LOCKED), f"{what}:\n{log[-4000:]}"
    _, parents, children = runs_by_kind(uri)
    sweep_parents = [p for p in parents if p.info.run_name.startswith("sweep ")]
    repro_runs = [p for p in parents if not p.info.run_name.startswith("sweep ")]
    assert len(sweep_parents) == 1 and len(children) == JOBS and len(repro_runs) == CLONES
    assert {r.info.status for r in parents + children} == {"FINISHED"}
    assert sorted(c.data.params["sweep.w2"] for c in children) == [str(w) for w in range(2, 2 + JOBS)]
    assert all(len(r.data.metrics) > 20 for r in children + repro_runs)
    return len(children) + len(repro_runs)


def test_eight_writers_into_one_sqlite_store(clones, tmp_path):
    uri = f"sqlite:///{tmp_path / 'shared.db'}"
    arrived = check_all_arrived(eight_writers(clones, uri, "sqlite"), uri)
    print(f"\n{arrived} of {JOBS + CLONES} runs arrived in one SQLite store (0 lost)")


def test_eight_writers_into_one_tracking_server(clones, tmp_path):
    server = Server(tmp_path / "server")
    try:
        results = eight_writers(clones, server.url, "server")
    finally:
        server.stop()
    locked = server.log.read_text().count("database is locked")
    arrived = check_all_arrived(results, server.store)  # read straight from the server's SQLite file
    print(
        f"\n{arrived} of {JOBS + CLONES} runs arrived through one server (0 lost; "
        f"'database is locked' in the server's own log: {locked})"
    )
