"""MLflow faults end in one message, and Hydra faults leave MLflow tidy (issue 21): a tracking server that dies
after the check, a damaged SQLite store (refused before any computing), a killed multirun's parent run (ended by the
next process that opens the store), and two sweeps started in the same second (each its own folder and parent)."""

from __future__ import annotations

import http.server
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import run

PY = sys.executable


# ---------------------------------------------------------------- a server alive at the check, dead when logging


@pytest.fixture
def server_dying_after_check():
    """A URL (with credentials) whose server answers one GET /health, then stops listening."""

    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"OK")

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Health)
    server.timeout = 60  # handle_request gives up after this: the thread always ends

    def once():
        server.handle_request()
        server.server_close()

    thread = threading.Thread(target=once, daemon=True)
    thread.start()
    yield f"http://bob:s3cretPW@127.0.0.1:{server.server_address[1]}"
    thread.join(timeout=70)


@pytest.fixture
def figures_inputs(ran_checkout) -> Path:
    """A checkout with the figures stage's inputs (a project that has run), params.yaml with tracking on.
    Requested before `server_dying_after_check`, whose server waits for its one request from then on."""
    return ran_checkout


@pytest.mark.slow
def test_server_dead_as_the_figures_stage_logs_is_one_message(figures_inputs, server_dying_after_check):
    """The figures stage's check reaches the server, then it is gone while the figure workers draw and the stage
    opens the store: one message naming the server (password redacted), what became of the run and the fix; exit 2
    (pipeline.repro's user-error path), no traceback, the figures folder as it was."""
    checkout = figures_inputs
    figures = checkout / "reports" / "figures" / "sweep"
    before = sorted(p.name for p in figures.iterdir())
    out = run(
        [PY, "-m", "pipeline.stages.figures"], checkout, check=False, MLFLOW_TRACKING_URI=server_dying_after_check
    )
    assert out.returncode == 2, out.stderr
    message = out.stderr.strip().splitlines()[-1]
    assert message.startswith("error in stage figures: the MLflow tracking server at http://bob:***@127.0.0.1:"), (
        message
    )
    assert "stopped answering while logging" in message and "nothing was logged" in message
    assert "python -m pipeline.server" in message, message
    assert "Traceback" not in out.stderr and "s3cretPW" not in out.stdout + out.stderr
    assert sorted(p.name for p in figures.iterdir()) == before


# ---------------------------------------------------------------- a URI MLflow cannot use, a page that is no server


def test_a_tracking_uri_with_a_query_string_is_refused_before_any_computing(checkout):
    """MLFLOW_TRACKING_URI=http://host:port/?token=...: the check passed on the UI page (the query swallowed the
    /health path) and MLflow's traceback came at logging. Now: exit 2, one message naming the fix (the token in
    MLFLOW_TRACKING_TOKEN), the token never printed, nothing computed."""
    from pipeline.base.errors import PipelineError
    from pipeline.outputs.tracking import check_reachable

    uri = "http://127.0.0.1:5999/?token=s3cretTOKEN"
    with pytest.raises(PipelineError, match=r"has a query string: .*MLFLOW_TRACKING_TOKEN") as refused:
        check_reachable(uri)
    assert "s3cretTOKEN" not in str(refused.value) and "(http://127.0.0.1:5999/)" in str(refused.value)
    out = run([PY, "-m", "pipeline.repro"], checkout, check=False, MLFLOW_TRACKING_URI=uri)
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    errors = [line for line in out.stderr.splitlines() if line.startswith("error")]
    assert len(errors) == 1 and "has a query string" in errors[0] and "s3cretTOKEN" not in out.stderr
    assert not (checkout / "data" / "tokens").exists()


def test_a_page_that_is_not_an_mlflow_server_is_refused():
    """A server that answers /health with something else than MLflow's `OK` (another web app on the port) is named as
    such before any computing; MLflow's own answer passes."""
    from http_server import FileServer

    from pipeline.base.errors import PipelineError
    from pipeline.outputs.tracking import check_reachable

    with FileServer() as other, FileServer() as mlflow_like:
        other.add("/health", b"<!doctype html><title>Some app</title>")
        mlflow_like.add("/mlflow/health", b"OK")
        with pytest.raises(PipelineError, match=r"answers, but not as an MLflow tracking server \(GET .*/health"):
            check_reachable(other.base)
        check_reachable(mlflow_like.base + "/mlflow/")  # a server under a path prefix


# ---------------------------------------------------------------- a damaged SQLite store


def damaged_stores(folder: Path) -> dict[str, Path]:
    """A healthy store made by MLflow, and three damaged copies: cut to half its size, garbage bytes, and a real
    store with junk written over one of its table pages (still opens: MLflow would use it silently)."""
    import sqlite3

    from pipeline.outputs.tracking import prepare_store

    healthy = folder / "healthy" / "mlflow.db"
    healthy.parent.mkdir(parents=True)
    prepare_store(f"sqlite:///{healthy}", "positional-encoding", folder)
    data = healthy.read_bytes()
    stores = {"healthy": healthy}
    for name, content in (("truncated", data[: len(data) // 2]), ("garbage", bytes(range(256)) * 64)):
        stores[name] = folder / name / "mlflow.db"
        stores[name].parent.mkdir()
        stores[name].write_bytes(content)
    with sqlite3.connect(healthy) as con:
        page_size = con.execute("PRAGMA page_size").fetchone()[0]
        root = con.execute("SELECT rootpage FROM sqlite_master WHERE name = 'experiments'").fetchone()[0]
    corrupt = bytearray(data)
    corrupt[(root - 1) * page_size : root * page_size] = (b"junk" * page_size)[:page_size]
    stores["corrupted page"] = folder / "corrupted" / "mlflow.db"
    stores["corrupted page"].parent.mkdir()
    stores["corrupted page"].write_bytes(bytes(corrupt))
    with sqlite3.connect(f"file:{stores['corrupted page']}?mode=ro", uri=True) as con:  # opens, as the probe said
        con.execute("SELECT 1").fetchone()
    return stores


@pytest.mark.slow
def test_damaged_sqlite_store_is_refused_before_any_computing(checkout, tmp_path):
    """pipeline.repro on a truncated, garbage or page-corrupted store: exit 2 with one message naming the file and the
    fix, no traceback, nothing computed; a healthy store, and a missing one, pass the check."""
    from pipeline.base.errors import PipelineError
    from pipeline.outputs.tracking import check_reachable

    stores = damaged_stores(tmp_path / "stores")
    check_reachable(f"sqlite:///{stores['healthy']}")
    check_reachable(f"sqlite:///{tmp_path / 'new' / 'mlflow.db'}")  # created by the first run
    for kind in ("truncated", "garbage", "corrupted page"):
        with pytest.raises(PipelineError, match="is damaged") as refused:
            check_reachable(f"sqlite:///{stores[kind]}")
        assert f"mv {stores[kind]} {stores[kind]}.broken" in str(refused.value), kind
    out = run([PY, "-m", "pipeline.repro"], checkout, check=False, MLFLOW_TRACKING_URI=f"sqlite:///{stores['garbage']}")
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    assert f"the MLflow store {stores['garbage']} is damaged (file is not a database)" in out.stderr
    assert out.stderr.count("is damaged") == 1 and not (checkout / "data" / "tokens").exists()
    stage = run(
        [PY, "-m", "pipeline.stages.tokenize"],  # the first stage of a plain `dvc repro` checks the store
        checkout,
        check=False,
        MLFLOW_TRACKING_URI=f"sqlite:///{stores['corrupted page']}",
    )
    assert stage.returncode == 2 and "Traceback" not in stage.stderr, stage.stderr
    assert stage.stderr.startswith("error in stage tokenize: the MLflow store") and "quick_check" not in stage.stderr


# ---------------------------------------------------------------- Hydra faults


def start_sweep(checkout: Path, *overrides: str) -> subprocess.Popen:
    """`python -m pipeline -m ...` in its own process group (a small sweep: no figures)."""
    return subprocess.Popen(
        [PY, "-m", "pipeline", "-m", *overrides, "figures=none"],
        cwd=checkout,
        env=dict(os.environ, PATH=f"{Path(PY).parent}{os.pathsep}{os.environ['PATH']}"),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


@pytest.mark.slow
def test_killed_multirun_parent_is_ended_by_the_next_run(checkout, tmp_path, private_mlflow_store):
    """kill -9 of a multirun's process group once its parent run exists: the next process that opens the store ends
    that parent FAILED, with a tag saying why."""
    from mlflow.tracking import MlflowClient

    from pipeline.outputs.tracking import prepare_store

    sweep_dir = tmp_path / "sweep"
    proc = start_sweep(checkout, "sweep.w2=1,2", f"hydra.sweep.dir={sweep_dir}")
    # guards a hang: the sweep composes, imports MLflow and creates its parent run: seconds on a quiet machine,
    # many times that on a loaded one
    deadline = time.monotonic() + 300
    while not (sweep_dir / "sweep.json").exists():  # written just after the parent run is created
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[0]
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)  # guards a hang: SIGKILL takes milliseconds
    parent = json.loads((sweep_dir / "sweep.json").read_text())["parent_run_id"]
    client = MlflowClient(private_mlflow_store)
    assert client.get_run(parent).info.status == "RUNNING"  # what the killed sweep left

    prepare_store(private_mlflow_store, "positional-encoding", checkout)  # any run or sweep opens the store so
    ended = client.get_run(parent)
    assert ended.info.status == "FAILED" and "killed" in ended.data.tags["error"]
    assert not list((checkout / "data" / "cache" / "mlflow-pending").glob("*.json"))


@pytest.mark.slow
def test_two_sweeps_started_together_keep_their_own_folders_and_parents(checkout, private_mlflow_store):
    """Two sweeps launched at the same moment (the default hydra.sweep.dir): separate folders and summaries, and each
    child run under its own sweep's parent run; the one with a failing job alone reports it and exits 1."""
    from mlflow.tracking import MlflowClient

    procs = {"failing": start_sweep(checkout, "sweep.w2=1,abc"), "clean": start_sweep(checkout, "sweep.w2=2")}
    outs = {name: proc.communicate(timeout=600)[0] for name, proc in procs.items()}
    assert procs["failing"].returncode == 1 and procs["clean"].returncode == 0, outs
    folders = sorted((checkout / "outputs" / "multirun").iterdir())
    assert len(folders) == 2, folders
    print("sweep folders:", [f.name for f in folders])  # the same second, as a rule: both start at once
    client = MlflowClient(private_mlflow_store)
    for folder in folders:
        sweep = json.loads((folder / "sweep.json").read_text())
        summary = json.loads((folder / "sweep_summary.json").read_text())
        failing = sweep["overrides"] == ["sweep.w2=1,abc", "figures=none"]
        assert (summary["jobs"], len(summary["failed"])) == ((2, 1) if failing else (1, 0)), summary
        children = client.search_runs(
            [client.get_run(sweep["parent_run_id"]).info.experiment_id],
            f"tags.mlflow.parentRunId = '{sweep['parent_run_id']}'",
        )
        names = sorted(c.info.run_name for c in children)
        assert names == (
            ["sweep.w2=1 figures=none", "sweep.w2=abc figures=none"] if failing else ["sweep.w2=2 figures=none"]
        )
        parent = client.get_run(sweep["parent_run_id"])
        assert parent.data.tags["sweep_dir"] == str(folder) and parent.info.status == (
            "FAILED" if failing else "FINISHED"
        )
