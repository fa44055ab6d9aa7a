"""MLflow server mode: `python -m pipeline.server` on 127.0.0.1, the pipeline logging to it over HTTP, a dead
server reported before any computing, and the UI checked in a real headless Chromium (Debian's `chromium`)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

from conftest import REPO, copy_checkout, run, typed

PY = sys.executable
FIGURE = "projection_s1_w1_1-w2_7.png"  # one of the figures the run below logs (sweep.w2=7)


def free_port() -> int:
    """A port nothing listens on right now (bound to port 0, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Server:
    """`python -m pipeline.server` on a private store, started in its own process group, stopped by `stop`."""

    def __init__(self, folder: Path, port: int | None = None):
        folder.mkdir(parents=True, exist_ok=True)
        self.store = f"sqlite:///{folder / 'mlflow.db'}"
        self.artifacts = folder / "mlartifacts"
        self.url = f"http://127.0.0.1:{port or free_port()}"
        self.log = folder / "server.log"
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                [
                    PY,
                    "-m",
                    "pipeline.server",
                    "--port",
                    self.url.rsplit(":", 1)[1],
                    "--workers",
                    "1",
                    "--backend-store-uri",
                    self.store,
                ],
                cwd=REPO,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        # a deadline against a server that never comes up: a quiet start takes seconds, a loaded 2-core machine has
        # taken more than 90 s; waiting longer costs nothing while it does come up. Up means /health answers and the
        # command has printed its links, which it does after its own look at /health, a moment after this one's
        deadline = time.monotonic() + 300
        while True:
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=2) as response:
                    if response.read().strip() == b"OK" and "use it: export MLFLOW_TRACKING_URI=" in self.output():
                        return
            except OSError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise AssertionError(f"mlflow server did not come up:\n{self.log.read_text()[-3000:]}")
            time.sleep(0.3)

    def output(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)  # the server and its uvicorn worker
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)


@pytest.fixture(scope="module")
def served_run(tmp_path_factory):
    """A server, and one real pipeline run (Hydra app, sweep.w2=7) logged to it over HTTP."""
    base = tmp_path_factory.mktemp("served")
    server = Server(base / "server")
    try:
        checkout = copy_checkout(base / "project")
        job = base / "job"
        out = run(
            [PY, "-m", "pipeline", "sweep.w2=7", f"hydra.run.dir={job}"], checkout, MLFLOW_TRACKING_URI=server.url
        )
        record = json.loads((job / "job_result.json").read_text())
        assert record["status"] == "finished", out.stderr
        yield server, checkout, job, record["run_id"]
    finally:
        server.stop()


@pytest.mark.slow
def test_server_run_has_the_same_contents_as_a_local_store_run(served_run, private_mlflow_store):
    """The same result logged through the server and straight into a SQLite store: same params, metrics, artifacts."""
    from mlflow.tracking import MlflowClient

    from pipeline.__main__ import shared_glove_store
    from pipeline.base.paths import Layout
    from pipeline.outputs.tracking import log_result
    from pipeline.stages.registry import logged_outputs

    server, checkout, job, served_id = served_run
    params = yaml.safe_load((job / "params.yaml").read_text())
    layout = Layout(job, glove=shared_glove_store(typed(params).glove, checkout))  # the store the job used
    local_id = log_result(params, layout, checkout, artifacts=logged_outputs(), run_name="sweep.w2=7")[
        "run_id"
    ]  # MLFLOW_TRACKING_URI: private store

    def contents(client, run_id):
        run_ = client.get_run(run_id)
        files = []
        stack = [None]
        while stack:
            for info in client.list_artifacts(run_id, stack.pop()):
                (stack.append(info.path) if info.is_dir else files.append((info.path, info.file_size)))
        return run_.data.params, run_.data.metrics, sorted(files), run_.info.status

    served = contents(MlflowClient(server.url), served_id)
    local = contents(MlflowClient(private_mlflow_store), local_id)
    assert served[0] == local[0] and served[0]["sweep.w2"] == "7"
    assert served[1] == local[1] and len(served[1]) > 20
    assert (
        served[2] == local[2]
        and (f"figures/{FIGURE}", (job / "reports" / "figures" / "sweep" / FIGURE).stat().st_size) in served[2]
    )
    assert served[3] == local[3] == "FINISHED"
    assert any(path == "inputs/manifest.json" for path, _ in served[2])  # the shared GloVe store's manifest
    # the server keeps the artifacts in its artifact root, beside its store
    assert (server.artifacts / served_id / "artifacts" / "figures" / FIGURE).is_file()
    assert server.store.startswith("sqlite:////") and Path(server.store[len("sqlite:///") :]).is_file()


@pytest.mark.slow
def test_unreachable_server_is_reported_before_any_computing(checkout, tmp_path):
    """A tracking URI where nothing listens: the Hydra app, a multirun, `pipeline.repro` and a plain `dvc repro`
    (its first stage) stop at once, with one clear message, and write no result."""
    dead = {"MLFLOW_TRACKING_URI": f"http://127.0.0.1:{free_port()}"}

    single = run([PY, "-m", "pipeline", f"hydra.run.dir={tmp_path / 'job'}"], checkout, check=False, **dead)
    assert single.returncode == 2
    assert "does not answer" in single.stderr + single.stdout and "pipeline.server" in single.stderr + single.stdout
    assert "Traceback" not in single.stderr and not (tmp_path / "job" / "reports").exists()

    sweep = run(
        [PY, "-m", "pipeline", "-m", "sweep.w2=1,2", f"hydra.sweep.dir={tmp_path / 'sweep'}"],
        checkout,
        check=False,
        **dead,
    )
    assert sweep.returncode == 2 and "does not answer" in sweep.stderr + sweep.stdout
    assert not (tmp_path / "sweep" / "0").exists()  # no job started

    repro = run([PY, "-m", "pipeline.repro"], checkout, check=False, **dead)
    assert repro.returncode == 2 and "does not answer" in repro.stderr and "Traceback" not in repro.stderr
    assert not (checkout / "data" / "glove").exists() and not (checkout / "data" / "tokens").exists()

    run([PY, "-m", "pipeline.compose"], checkout)
    stage = run(["dvc", "repro"], checkout, check=False, **dead)
    assert stage.returncode != 0 and "error in stage tokenize: MLflow server" in stage.stderr
    assert not (checkout / "data" / "glove").exists() and not (checkout / "data" / "tokens").exists()


@pytest.mark.slow
def test_mlflow_ui_shows_the_run_and_a_figure_in_chromium(served_run, tmp_path):
    """Headless Debian chromium (driven by playwright): the experiment's runs table lists the run; its Artifacts
    tab lists the figures and renders one (the image loads from the server). Screenshot: mlflow_ui_*.png."""
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.skip("Debian's chromium is not installed (apt-get install -y chromium); .ci/run installs it")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install -e .[test])")
    from mlflow.tracking import MlflowClient

    server, _, job, run_id = served_run
    png = (job / "reports" / "figures" / "sweep" / FIGURE).read_bytes()
    png_size = [int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")]  # IHDR width, height
    run_ = MlflowClient(server.url).get_run(run_id)
    run_name, experiment_id = run_.info.run_name, run_.info.experiment_id
    shots = Path(os.environ.get("PE_UI_SCREENSHOTS", tmp_path))
    shots.mkdir(parents=True, exist_ok=True)
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(120_000)  # guards a hang: a step takes seconds on a quiet machine
            page.goto(f"{server.url}/#/experiments/{experiment_id}/runs?workflowType=machine_learning")
            link = page.get_by_role("link", name=run_name, exact=True)
            link.wait_for(state="visible")
            page.screenshot(path=str(shots / "mlflow_ui_experiment.png"))
            link.click()
            page.get_by_role("tab", name="Artifacts").click()
            page.get_by_text("figures", exact=True).click()
            page.get_by_text(FIGURE, exact=True).click()
            page.get_by_text(f"figures/{FIGURE}", exact=True).wait_for(state="visible")  # the preview's title
            loaded = (
                "() => Array.from(document.images).filter(i => i.complete && i.naturalWidth > 0"
                " && !i.src.startsWith('data:')).map(i => [i.naturalWidth, i.naturalHeight])"
            )
            page.wait_for_function(f"() => ({loaded})().length > 0")
            sizes = page.evaluate(loaded)
            page.screenshot(path=str(shots / "mlflow_ui_figure.png"))
        except Exception:
            page.screenshot(path=str(shots / "mlflow_ui_failure.png"))  # what the browser showed instead
            print(f"screenshot of the failure: {shots / 'mlflow_ui_failure.png'}")
            raise
        finally:
            browser.close()
    # the images the page loaded (the preview may hold two copies) are the PNG the run logged, served and decoded
    assert sizes and all(size == png_size for size in sizes), (sizes, png_size)
    print(f"screenshots: {shots / 'mlflow_ui_experiment.png'}, {shots / 'mlflow_ui_figure.png'}")


# ---------------------------------------------------------------- a server killed mid-run, credentials in the URI

LOGGER = """
import sys, time
from pathlib import Path
from pipeline.base.errors import PipelineError
from pipeline.base.paths import Layout
from pipeline.config import compose
from pipeline.outputs.tracking import log_result
from pipeline.stages.registry import logged_outputs
params = compose(["sweep.w2=3"])
started = time.monotonic()
try:
    print(log_result(params, Layout(Path(sys.argv[1])), Path(sys.argv[2]), artifacts=logged_outputs(), run_name="killed")["run_id"])
except PipelineError as exc:
    print(f"error after {time.monotonic() - started:.1f} s: {exc}", file=sys.stderr)
    raise SystemExit(2)
"""


def logger(result: Path, project: Path, uri: str) -> subprocess.Popen:
    return subprocess.Popen(
        [PY, "-c", LOGGER, str(result), str(project)],
        cwd=REPO,
        text=True,
        env=dict(os.environ, MLFLOW_TRACKING_URI=uri, PE_PROJECT_ROOT=str(project)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


@pytest.mark.slow
def test_server_killed_mid_run_fails_fast_and_the_run_ends_failed(tmp_path):
    """kill -9 of the tracking server while a run logs its artifacts: the logger stops soon with one message
    (no traceback, the URI's password redacted), and the next process that reaches the restarted server ends the
    abandoned run as FAILED. Credentials in the URI work (a full run logged through them) and are never printed."""
    from mlflow.tracking import MlflowClient

    from test_sweeps import fake_result

    project = copy_checkout(tmp_path / "project")  # PE_PROJECT_ROOT: its data/cache holds the pending records
    result = tmp_path / "result"
    fake_result(result, figures=20000)  # a run long enough to kill the server in the middle of it
    server = Server(tmp_path / "server")
    port = int(server.url.rsplit(":", 1)[1])
    secret = "s3cretPW"
    uri = f"http://bob:{secret}@127.0.0.1:{port}"
    try:
        proc = logger(result, project, uri)
        # guards a hang: the logger imports MLflow, as the server does, before its first upload: seconds on a quiet
        # machine, many times that on a loaded one
        deadline = time.monotonic() + 300
        while not any(server.artifacts.glob("*/artifacts/figures/*.png")):  # the run is logging its figures
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.05)
        os.killpg(server.proc.pid, signal.SIGKILL)
        killed = time.monotonic()
        out, err = proc.communicate(timeout=120)
        took = time.monotonic() - killed
    finally:
        server.stop()
    assert proc.returncode == 2, err
    print(f"the logger stopped {took:.1f} s after the server was killed: {err.strip().splitlines()[-1]}")
    # fails fast, by design within ~30 s (pipeline.outputs.tracking.HTTP_DEFAULTS: 3 tries of at most 8 s, 3 s of
    # backoff) instead of MLflow's own ~8 minutes; the bound leaves a loaded machine 4 times that (31 s was seen)
    assert took < 120, (took, err)
    assert "stopped answering" in err and "bob:***@127.0.0.1" in err and "Traceback" not in err, err
    assert secret not in out + err
    [pending] = list((project / "data" / "cache" / "mlflow-pending").glob("*.json"))
    assert secret not in pending.read_text()

    server = Server(tmp_path / "server", port=port)  # the same store, at the same address
    try:
        small = tmp_path / "small"
        fake_result(small, figures=2)
        again = logger(small, project, uri)
        out2, err2 = again.communicate(timeout=600)  # guards a hang: a two-figure run takes seconds when quiet
        assert again.returncode == 0, err2
        client = MlflowClient(server.url)
        runs = {r.info.run_id: r for r in client.search_runs([e.experiment_id for e in client.search_experiments()])}
    finally:
        server.stop()
    killed_run = runs[pending.stem]
    assert killed_run.info.status == "FAILED" and "killed" in killed_run.data.tags["error"]
    assert runs[out2.strip().splitlines()[-1]].info.status == "FINISHED"  # logged through bob:***@ credentials
    assert not pending.exists() and "ended 1 run(s)" in err2 and secret not in out2 + err2


def test_credentials_in_the_tracking_uri_are_never_printed(checkout, tmp_path):
    """A dead server at a URI with credentials: the early check names it with the password redacted."""
    dead = {"MLFLOW_TRACKING_URI": f"http://bob:s3cretPW@127.0.0.1:{free_port()}"}
    single = run([PY, "-m", "pipeline", f"hydra.run.dir={tmp_path / 'job'}"], checkout, check=False, **dead)
    assert single.returncode == 2 and "does not answer" in single.stderr + single.stdout
    assert "bob:***@127.0.0.1" in single.stderr + single.stdout and "s3cretPW" not in single.stderr + single.stdout


def test_serving_beyond_this_machine_needs_public_and_says_there_is_no_authentication(tmp_path, monkeypatch, capsys):
    """`--host 0.0.0.0` served an unauthenticated store on every interface without a word and printed
    MLFLOW_TRACKING_URI=http://0.0.0.0:PORT. Now it is refused (exit 2, nothing bound) unless --public, which prints a
    warning naming MLflow's authentication, and a URI with an address of this machine that MLflow answers. (The server
    itself is not started here: tests bind to loopback only.)"""
    from pipeline import server

    port, store = free_port(), f"sqlite:///{tmp_path / 'mlflow.db'}"
    refused = run([PY, "-m", "pipeline.server", "--host", "0.0.0.0", "--port", str(port)], REPO, check=False)
    assert refused.returncode == 2 and refused.stdout == "", refused
    assert refused.stderr.startswith("error: --host 0.0.0.0 serves the MLflow store") and "--public" in refused.stderr
    assert "--app-name basic-auth" in refused.stderr and "Traceback" not in refused.stderr
    assert not (tmp_path / "mlflow.db").exists()

    started = {}

    def serve(cmd, env, url, links):  # what would run `mlflow server` and print the links once it answers
        started.update(argv=cmd, env=env, links=links)
        return 0

    monkeypatch.setattr(server, "serve", serve)
    assert server.main(["--host", "0.0.0.0", "--public", "--port", str(port), "--backend-store-uri", store]) == 0
    _, err = capsys.readouterr()
    assert "has no authentication" in err and "mlflow server --app-name basic-auth" in err
    address = server.reachable_address("0.0.0.0")
    assert address != "0.0.0.0" and f"export MLFLOW_TRACKING_URI={server.url_of(address, port)}\n" in started["links"]
    argv = started["argv"]
    assert argv[argv.index("--host") + 1] == "0.0.0.0"
    if not server.answered_by_default(address):  # MLflow must answer requests for the printed address
        assert address in argv[argv.index("--allowed-hosts") + 1].split(",")
    assert server.url_of("fd00::2", 5000) == "http://[fd00::2]:5000" and server.loopback("localhost")


@pytest.mark.slow
def test_the_link_is_printed_only_once_the_server_answers(tmp_path):
    """The links `python -m pipeline.server` prints: by the time they are in its output, /health answers (it checks
    first), so the first click opens MLflow, not an error page. `--help` prints the description once. SIGTERM to the
    command ends it, and the server, with the usual line and exit 143 (before: no line)."""
    server = Server(tmp_path / "server")
    try:
        deadline = time.monotonic() + 300  # the link follows /health: a loaded machine can take minutes for both
        while "use it: export MLFLOW_TRACKING_URI=" not in server.log.read_text() and time.monotonic() < deadline:
            assert server.proc.poll() is None, server.log.read_text()
            time.sleep(0.2)
        log = server.log.read_text()
        assert log.index("starting the MLflow server") < log.index("use it: export MLFLOW_TRACKING_URI=")
        # the UI's telemetry is off with the rest (MLflow's home page shows its notice about it whatever this says)
        with urllib.request.urlopen(server.url + "/ajax-api/3.0/mlflow/ui-telemetry", timeout=30) as response:
            assert json.loads(response.read())["disable_ui_telemetry"] is True
        server.proc.send_signal(signal.SIGTERM)  # to the command alone
        server.proc.wait(timeout=300)  # MLflow ends its own workers first
    finally:
        server.stop()
    assert server.proc.returncode == 143
    assert server.output().rstrip().endswith(f"interrupted by SIGTERM: stopped the MLflow server on {server.url}")
    helped = run([PY, "-m", "pipeline.server", "--help"], REPO)
    assert helped.stdout.count("serve the project's MLflow store over HTTP") == 1


def test_the_server_prints_no_link_before_health_answers(tmp_path, monkeypatch, capsys):
    """A server process that never answers /health and exits: no link printed, its exit status returned."""
    from pipeline import server

    status = server.serve(
        [sys.executable, "-c", "import time; time.sleep(1); raise SystemExit(3)"],
        dict(os.environ),
        f"http://127.0.0.1:{free_port()}",
        "THE LINKS",
    )
    out = capsys.readouterr()
    assert status == 3 and "THE LINKS" not in out.out and "exited with status 3" in out.err
