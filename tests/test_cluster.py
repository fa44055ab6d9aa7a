"""Beyond one machine, on the real systems: a Hydra sweep through a real SLURM cluster (`sbatch`, Debian's
slurm-wlm + munge: `.ci/slurm-up.sh`), and the team's MLflow server on a real PostgreSQL database (Debian's
postgresql: `.ci/postgres-up.sh`). Each is skipped, with the reason, where its system is absent."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import pytest

from conftest import REPO, copy_checkout, run
from test_mlflow_server import free_port
from test_sweeps import check_sweep, job, runs_by_kind

PY = sys.executable
FAST = ["figures.dpi=40"]
SLURM = ["hydra/launcher=slurm", "hydra.launcher.partition=cpu"]


# ---------------------------------------------------------------- SLURM


def slurm_answers() -> str | None:
    """None when a SLURM controller answers with partition `cpu` up, else why not."""
    if shutil.which("sinfo") is None or shutil.which("sbatch") is None:
        return "SLURM is not installed (sinfo/sbatch not on PATH); .ci/run starts one with .ci/slurm-up.sh"
    try:
        out = subprocess.run(["sinfo", "-h", "-p", "cpu", "-o", "%a %t"], capture_output=True, text=True, timeout=15)
    except subprocess.TimeoutExpired:
        return "sinfo does not answer in 15 s (slurmctld not running?)"
    states = out.stdout.split()
    if (
        out.returncode != 0
        or not states
        or states[0] != "up"
        or not any(s.rstrip("*~#") in ("idle", "mix", "alloc", "comp") for s in states[1:])
    ):
        return f"no SLURM partition `cpu` with a live node (sinfo: {(out.stdout + out.stderr).strip()!r})"
    return None


@pytest.fixture
def slurm_checkout(tmp_path) -> Path:
    reason = slurm_answers()
    if reason:
        pytest.skip(reason)
    checkout = copy_checkout(tmp_path / "project")
    if sys.prefix != sys.base_prefix:  # the launcher's `setup: source .venv/bin/activate`, as in a real checkout
        (checkout / ".venv").symlink_to(sys.prefix)
    return checkout


@pytest.mark.slow
def test_slurm_sweep_through_sbatch(slurm_checkout, private_mlflow_store):
    """The cluster command of docs/sweeps.md on a real SLURM cluster: each point an sbatch array task (job dirs, child
    runs in MLflow, the parent's summary), a point that fails at job time reported as failed, and no `sacct`
    noise where accounting is off."""
    out = run(
        [PY, "-m", "pipeline", "-m", *SLURM, "sweep.w2=1,10,abc", *FAST, "hydra.sweep.dir=multirun_test"],
        slurm_checkout,
        check=False,
    )
    log = out.stdout + out.stderr
    assert out.returncode == 1, log
    check_sweep(
        slurm_checkout,
        slurm_checkout / "multirun_test",
        private_mlflow_store,
        finished=[job("sweep.w2=1"), job("sweep.w2=10")],
        failed=[job("sweep.w2=abc")],
    )
    assert f"FAILED #2 {job('sweep.w2=abc')}: config key sweep.w2" in log
    # they went through sbatch: submitit's array script names the partition; SLURM ran each task
    scripts = list((slurm_checkout / "multirun_test" / ".submitit").glob("*/*_submission.sh"))
    assert scripts and "#SBATCH --partition=cpu" in scripts[0].read_text()
    logs = list((slurm_checkout / "multirun_test" / ".submitit").glob("*_[0-2]/*_log.out"))
    assert len(logs) == 3, logs
    # readable: the jobs are followed with squeue, so no sacct warning at any poll (.ci's cluster has no accounting)
    assert "Bypassing sacct error" not in log and "accounting storage is disabled" not in log


@pytest.mark.slow
def test_slurm_job_ended_by_slurm_is_reported_not_awaited(slurm_checkout, private_mlflow_store):
    """A job SLURM ends without a result (its process SIGKILLed here, as by the OOM killer): the sweep
    stops within a minute with an error naming the job's logs and its parent run FAILED, instead of waiting
    forever for a state `sacct` cannot give."""
    name = f"pe-{uuid.uuid4().hex[:8]}"
    env = dict(os.environ, PATH=f"{Path(PY).parent}{os.pathsep}{os.environ['PATH']}")
    proc = subprocess.Popen(
        [
            PY,
            "-m",
            "pipeline",
            "-m",
            *SLURM,
            f"hydra.launcher.name={name}",
            "sweep.w2=1",
            *FAST,
            "hydra.sweep.dir=multirun_test",
        ],
        cwd=slurm_checkout,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120  # guards a hang: SLURM starts the job within seconds when it is quiet
        while True:  # wait until the job runs, then cancel it
            ids = subprocess.run(
                ["squeue", "-h", "-n", name, "-t", "RUNNING", "-o", "%i"], capture_output=True, text=True
            ).stdout.split()
            if ids:
                break
            assert proc.poll() is None and time.monotonic() < deadline, "the job never ran"
            time.sleep(0.5)
        time.sleep(2)
        # the job's python killed as the OOM killer would (scancel's SIGTERM would let submitit's job run on
        # through SLURM's KillWait): by PID, found by this checkout's unique path in its command line, once it has
        # started (a loaded machine may take longer than a quiet one's moment to start it: guards a hang only)
        deadline = time.monotonic() + 120
        while not (
            pids := subprocess.run(
                ["pgrep", "-f", f"submitit.core._submit {slurm_checkout}"], capture_output=True, text=True
            ).stdout.split()
        ):
            assert proc.poll() is None and time.monotonic() < deadline, "the job's process was not found"
            time.sleep(0.5)
        for pid in pids:
            os.kill(int(pid), signal.SIGKILL)
        killed = time.monotonic()
        log, _ = proc.communicate(timeout=120)
        reported_s = time.monotonic() - killed
    finally:
        if proc.poll() is None:
            proc.kill()
            subprocess.run(["scancel", "-n", name], check=False)
    assert proc.returncode != 0, log
    assert "ended (" in log and "without a result" in log and "_log.err" in log, log[-3000:]
    from hydra_plugins.pe_pipeline_slurm import POLL_S

    # by design within 3 polls of the launcher (the one that saw the job live, two without it), then the sweep's
    # end; the bound leaves a loaded machine 4 times that, and the failure it guards against (waiting forever for a
    # state sacct cannot give) never ends
    assert reported_s < 4 * 3 * POLL_S, reported_s
    _, parents, children = runs_by_kind(private_mlflow_store)
    assert [p.info.status for p in parents] == ["FAILED"] and not children


# ---------------------------------------------------------------- PostgreSQL


@pytest.fixture
def postgres_db():
    """A fresh database on the PostgreSQL server of $PE_TEST_POSTGRES_URI (.ci/postgres-up.sh prints it);
    yields its URI, dropped afterwards."""
    admin = os.environ.get("PE_TEST_POSTGRES_URI")
    if not admin:
        pytest.skip("no PostgreSQL server: set PE_TEST_POSTGRES_URI (.ci/run starts one with .ci/postgres-up.sh)")
    psycopg2 = pytest.importorskip("psycopg2", reason='psycopg2 is not installed (pip install -e ".[postgres]")')
    try:
        conn = psycopg2.connect(admin, connect_timeout=5)
    except psycopg2.OperationalError as exc:
        pytest.skip(f"the PostgreSQL server of PE_TEST_POSTGRES_URI does not answer: {exc}")
    conn.autocommit = True
    name = f"pe_test_{uuid.uuid4().hex[:12]}"
    with conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE {name}")
    try:
        yield admin.rsplit("/", 1)[0] + "/" + name
    finally:
        with conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        conn.close()


@pytest.mark.slow
def test_team_server_on_postgresql(postgres_db, tmp_path):
    """`python -m pipeline.server --backend-store-uri postgresql://...` (docs/mlflow.md, a team server), a multirun logged
    through it over HTTP: every run lands in the PostgreSQL database, and the password is printed nowhere."""
    import psycopg2

    checkout = copy_checkout(tmp_path / "project")
    url = f"http://127.0.0.1:{free_port()}"
    server_log = tmp_path / "server.log"
    with open(server_log, "wb") as out:
        server = subprocess.Popen(
            [
                PY,
                "-m",
                "pipeline.server",
                "--port",
                url.rsplit(":", 1)[1],
                "--workers",
                "2",
                "--backend-store-uri",
                postgres_db,
            ],
            cwd=checkout,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        # a deadline against a server that never comes up: a quiet start takes seconds, a loaded machine's many
        # times that (MLflow's imports); waiting longer costs nothing while it does come up
        deadline = time.monotonic() + 300
        while True:
            try:
                with urllib.request.urlopen(url + "/health", timeout=2) as response:
                    if response.read().strip() == b"OK":
                        break
            except OSError:
                pass
            assert server.poll() is None and time.monotonic() < deadline, server_log.read_text()[-3000:]
            time.sleep(0.3)
        sweep = run(
            [PY, "-m", "pipeline", "-m", "sweep.w2=1,10", *FAST, "hydra.sweep.dir=multirun_test"],
            checkout,
            MLFLOW_TRACKING_URI=url,
        )
        check_sweep(
            checkout, checkout / "multirun_test", url, finished=[job("sweep.w2=1"), job("sweep.w2=10")], failed=[]
        )
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)  # guards a hang: gunicorn's workers stop within a second when the machine is quiet
    # the runs are rows of the PostgreSQL database (not of some SQLite file beside it)
    with psycopg2.connect(postgres_db) as conn, conn.cursor() as cur:
        cur.execute("SELECT status, count(*) FROM runs GROUP BY status")
        assert dict(cur.fetchall()) == {"FINISHED": 3}  # the parent and its two children
        cur.execute("SELECT count(DISTINCT key) FROM metrics")
        assert cur.fetchone()[0] > 20
    assert not list(checkout.rglob("*.db"))
    printed = server_log.read_text() + sweep.stdout + sweep.stderr
    assert "MLflow server for postgresql+psycopg2://pe:***@" in printed and ":pe@" not in printed
    assert json.loads((checkout / "multirun_test" / "sweep.json").read_text())["tracking_uri"] == url


def test_server_refuses_a_postgresql_store_without_its_driver_clearly(tmp_path):
    """Without psycopg2 (the `postgres` extra) the server says what to install, and never prints the password."""
    blocker = tmp_path / "nopsycopg"
    (blocker / "psycopg2").mkdir(parents=True)
    (blocker / "psycopg2" / "__init__.py").write_text("raise ImportError('blocked for the test')\n")
    out = run(
        [PY, "-m", "pipeline.server", "--backend-store-uri", "postgresql://alice:s3cret@127.0.0.1:1/x"],
        REPO,
        check=False,
        PYTHONPATH=str(blocker),
    )
    assert out.returncode == 2 and ".[postgres]" in out.stderr and "s3cret" not in out.stdout + out.stderr
    assert "Traceback" not in out.stderr
