"""A tidy MLflow (issue 13): the experiment opens on its runs table, runs have distinct descriptive names, a DVC
run's duration covers the pipeline, each artifact is stored once, and the GloVe store and texts are datasets."""

from __future__ import annotations

import os
import re
import shutil
import time
from pathlib import Path

import pytest

from conftest import REPO, params_for, run_stages


@pytest.fixture(scope="module")
def result(tmp_path_factory, small_store):
    """A real pipeline result (the in-process stages up to the report) on the small GloVe store."""
    out = tmp_path_factory.mktemp("result")
    params = params_for("figures.dpi=40")
    layout = run_stages(params, out, small_store, upto="figures")
    return params, layout


def artifact_files(client, run_id: str, path: str | None = None) -> set[str]:
    """Every artifact file of a run, at any depth."""
    files = set()
    for info in client.list_artifacts(run_id, path):
        files |= artifact_files(client, run_id, info.path) if info.is_dir else {info.path}
    return files


def run_bytes(store_uri: str, run_id: str) -> int:
    """Bytes the run's artifacts take in a local store (artifacts beside the .db)."""
    root = Path(store_uri[len("sqlite:///") :]).parent / "mlartifacts" / run_id
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def test_experiment_is_tagged_for_the_runs_table(private_mlflow_store):
    """Created with mlflow.experimentKind = custom_model_development; an existing experiment without it gets it."""
    from mlflow.tracking import MlflowClient

    from pipeline.outputs.tracking import EXPERIMENT_KIND_TAG, artifact_location, prepare_store

    js = REPO / ".venv/lib/python3.11/site-packages/mlflow/server/js/build/static/js"
    if js.is_dir():  # the value is one the installed UI knows
        assert any('"custom_model_development"' in p.read_text(errors="ignore") for p in js.glob("main*.js"))
    client = MlflowClient(private_mlflow_store)
    new_id = prepare_store(private_mlflow_store, "fresh", REPO)
    # artifacts beside the store, as the pipeline's are (MLflow's default, ./mlruns of the cwd, is the checkout)
    old_id = client.create_experiment("older", artifact_location=artifact_location(private_mlflow_store))
    assert EXPERIMENT_KIND_TAG not in client.get_experiment(old_id).tags
    assert prepare_store(private_mlflow_store, "older", REPO) == old_id
    for experiment_id in (new_id, old_id):
        assert client.get_experiment(experiment_id).tags[EXPERIMENT_KIND_TAG] == "custom_model_development"


def test_a_copied_store_logs_into_its_own_project(tmp_path, monkeypatch):
    """`cp -a` of a workspace copies mlflow.db, whose experiment records the original's absolute artifact folder:
    every run of the copy logged its artifacts into the original's mlartifacts/ (30 runs in the probe). Opened in the
    copy, the store is re-anchored: the experiment holding the original's runs is renamed, saying where their artifacts
    are, and the copy's runs go to a new experiment of the same name, with artifacts beside the copy's store."""
    from mlflow.tracking import MlflowClient

    from pipeline.outputs import tracking

    original, copy = tmp_path / "original", tmp_path / "copy"
    original.mkdir()
    first = tracking.prepare_store(f"sqlite:///{original / 'mlflow.db'}", "positional-encoding", original)
    shutil.copytree(original, copy)
    uri = f"sqlite:///{copy / 'mlflow.db'}"
    client = MlflowClient(uri)
    assert client.get_experiment(first).artifact_location == (original / "mlartifacts").as_uri()
    monkeypatch.setattr(tracking, "_CLIENTS", {})
    anchored = tracking.prepare_store(uri, "positional-encoding", copy)
    assert anchored != first
    assert client.get_experiment(anchored).artifact_location == (copy / "mlartifacts").as_uri()
    assert client.get_experiment(first).name == f"positional-encoding (artifacts in {original / 'mlartifacts'})"
    run = client.create_run(anchored)
    (tmp_path / "a.txt").write_text("x")
    client.log_artifact(run.info.run_id, str(tmp_path / "a.txt"))
    assert (copy / "mlartifacts" / run.info.run_id / "artifacts" / "a.txt").exists()
    assert not (original / "mlartifacts").exists()
    monkeypatch.setattr(tracking, "_CLIENTS", {})
    assert tracking.prepare_store(uri, "positional-encoding", copy) == anchored  # once: the copy is its own now


def test_run_names_tell_runs_apart(monkeypatch):
    """Config summary plus its short hash; a DVC experiment's name instead of the hash; a sweep by overrides + time."""
    from pipeline.outputs.tracking import default_run_name, params_digest, sweep_run_name

    seed, queen = params_for(), params_for("texts=queen_king")
    w2 = params_for("sweep.w2=3")
    assert re.fullmatch(r"path seed sinusoidal · [0-9a-f]{6}", default_run_name(seed))
    assert len({default_run_name(p) for p in (seed, queen, w2)}) == 3  # w2 differs only by the hash
    assert default_run_name(params_for()) == default_run_name(seed)  # same config, same name
    moved = {**seed, "tracking": {**seed["tracking"], "uri": "http://elsewhere:5000"}}
    assert params_digest(moved) == params_digest(seed)  # where it is logged does not change what it is
    assert default_run_name(seed, "rapt-mews") == "rapt-mews · path seed sinusoidal"
    # issue 36: named by what differs from the defaults, short, and still distinct when cut
    assert default_run_name(seed, None, []) == "defaults"
    assert default_run_name(queen, None, ["texts=queen_king"]) == "texts=queen_king"
    assert default_run_name(w2, "rapt-mews", ["sweep.w2=3"]) == "rapt-mews · sweep.w2=3"
    long = [f"sweep.ratios.{k}={v}" for k, v in (("min", 0.001), ("max", 1000), ("points", 9))]
    one, two = params_for(*long), params_for(*long[:2], "sweep.ratios.points=7")
    names = default_run_name(one, None, long), default_run_name(two, None, [*long[:2], "sweep.ratios.points=7"])
    assert names[0] != names[1] and all(len(n.split(" · ")[0]) <= 40 for n in names)
    started = time.mktime((2024, 5, 14, 10, 32, 7, 0, 0, -1))
    assert sweep_run_name(["sweep.w2=1,10"], started) == "sweep sweep.w2=1,10 · 2024-05-14 10:32:07"
    assert sweep_run_name(["sweep.w2=1,10"], started + 60) != sweep_run_name(["sweep.w2=1,10"], started)


def test_sweep_parent_run_is_named_by_its_sweep(tmp_path, private_mlflow_store):
    from hydra import compose, initialize_config_dir
    from mlflow.tracking import MlflowClient

    from pipeline.outputs.parent_run import MultirunParentRun

    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        cfg = compose(
            "config", overrides=[f"hydra.sweep.dir={tmp_path / 'sweep'}", "sweep.w2=4"], return_hydra_config=True
        )
    callback = MultirunParentRun()
    callback.on_multirun_start(config=cfg)
    callback._close_if_open()
    client = MlflowClient(private_mlflow_store)
    [parent] = client.search_runs([client.get_experiment_by_name("positional-encoding").experiment_id])
    assert re.fullmatch(r"sweep sweep\.w2=4 · \d{4}-\d\d-\d\d \d\d:\d\d:\d\d", parent.info.run_name)


def test_dvc_run_starts_when_the_pipeline_did(tmp_path):
    """Start = earliest input written by this repro: after the previous run's end; on a first run the DVC-cached
    inputs only (git's files carry the clone's time)."""
    from pipeline.base.files import write_json
    from pipeline.base.paths import Layout
    from pipeline.outputs.run_record import pipeline_start
    from pipeline.stages.figures import start_inputs

    layout = Layout(tmp_path)
    now = time.time()
    files = {
        layout.glove_manifest: now - 50,
        layout.tokens: now - 40,
        layout.encode_figures_dir / "a.png": now - 10,
        layout.pe_norms_csv: now - 3600,  # a git-tracked output: its time is the clone's
        layout.metrics: now - 20,
    }
    for path, mtime in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x")
        os.utime(path, (mtime, mtime))
    # file times come back to the microsecond; approx's default (1e-6 relative: half an hour of a Unix time) could
    # not tell one file from another
    inputs = start_inputs()  # the figures stage's: glove, tokens and the figures cached, metrics in git
    assert pipeline_start(layout, now, inputs) == pytest.approx(now - 50, abs=0.01)  # first run: the clone time ignored
    write_json(layout.mlflow_last_run, {"enabled": True, "end_time": int((now - 45) * 1000)})
    assert pipeline_start(layout, now, inputs) == pytest.approx(now - 40, abs=0.01)  # glove is from the previous repro
    write_json(layout.mlflow_last_run, {"enabled": True, "end_time": int((now - 5) * 1000)})
    assert pipeline_start(layout, now, inputs) == now  # nothing newer: only this stage ran
    layout.mlflow_last_run.unlink()  # a queued experiment's copy: no previous run, inputs from the cache
    assert pipeline_start(layout, now, inputs, not_before=now - 15) == pytest.approx(now - 10)  # not before dvc started


def test_a_stage_under_dvc_knows_when_dvc_started(tmp_path):
    """The nearest `dvc` process above a stage (here a stand-in whose command line names dvc) gives the start that a
    queued experiment's run may not precede (before: MLflow start times 22 minutes early)."""
    import subprocess
    import sys

    script = (
        "import time, subprocess, sys; time.sleep(0.3); "
        "print(subprocess.run([sys.executable, '-c', 'from pipeline.outputs.run_record import dvc_started; "
        "print(dvc_started())'], capture_output=True, text=True, cwd=sys.argv[1]).stdout)"
    )
    before = time.time()
    out = subprocess.run([sys.executable, "-c", script, str(REPO), "dvc"], capture_output=True, text=True, check=True)
    started = float(out.stdout.split()[0])
    assert before - 2 <= started <= before + 2  # the stand-in's start (psutil dates it to the second)


@pytest.mark.slow
def test_run_stores_each_artifact_once_with_datasets(result, private_mlflow_store, monkeypatch):
    """The run logs every output the registry declares with `log` (under its folder) and the inputs; the logged
    report references the logged figures (no second, base64 copy), the report on disk stays self-contained, the
    start time is the given one, and the GloVe store and texts are dataset inputs."""
    from mlflow.tracking import MlflowClient

    from pipeline.base.files import read_json, sha256_file
    from pipeline.outputs.tracking import log_result
    from pipeline.stages.registry import BY_NAME, logged_outputs

    params, layout = result
    monkeypatch.setenv("DVC_EXP_NAME", "rapt-mews")
    start = int(time.time() * 1000) - 7000
    record = log_result(params, layout, REPO, artifacts=logged_outputs(), start_time=start)
    client = MlflowClient(private_mlflow_store)
    run = client.get_run(record["run_id"])
    assert run.info.run_name == "rapt-mews · path seed sinusoidal" and run.info.start_time == start
    assert run.info.end_time - run.info.start_time >= 7000

    on_disk = layout.report_html.read_text()
    logged = Path(client.download_artifacts(record["run_id"], "report.html", str(layout.base / "dl"))).read_text()
    figures = sorted(p.name for p in layout.figures_dir.glob("*/*.png"))
    embedded = on_disk.count("data:image/png;base64,")
    assert embedded >= 10 and "data:image/png;base64," not in logged
    referenced = re.findall(r'src="figures/([^"]+)"', logged)
    assert len(referenced) == embedded and set(referenced) <= set(figures)
    logged_figures = {a.path for a in client.list_artifacts(record["run_id"], "figures")}
    assert logged_figures == {f"figures/{name}" for name in figures}
    inputs = (layout.params, layout.glove_manifest, layout.tokens, layout.encode_summary)
    expected = {f"inputs/{p.name}" for p in inputs if p.exists()}  # params.yaml: written by compose, not here
    for name, folder in logged_outputs():
        path = getattr(layout, name)
        if not path.exists():  # reports/study/: the study stage is DVC's alone (run_stages runs a Hydra job's)
            continue
        expected |= {f"{folder}/{f.name}" if folder else f.name for f in (path.iterdir() if path.is_dir() else [path])}
    assert artifact_files(client, record["run_id"]) == expected
    assert {"metrics.json", "report.html", "plots/pe_norms.csv", "figures/alibi_bias.png"} <= expected
    # DVC runs the stage that logs them after the others: their outputs are its inputs
    logging_stage = BY_NAME["figures"]
    own = {out.layout for out in logging_stage.outputs}
    assert {name for name, _ in logged_outputs()} - own <= set(logging_stage.inputs)

    stored = run_bytes(private_mlflow_store, record["run_id"])
    figure_bytes = sum(p.stat().st_size for p in layout.figures_dir.glob("*/*.png"))
    report_bytes = layout.report_html.stat().st_size
    assert figure_bytes < stored < figure_bytes + report_bytes / 4, (stored, figure_bytes, report_bytes)
    print(f"bytes stored by the run: {stored} (figures {figure_bytes}; report on disk {report_bytes})")

    manifest = read_json(layout.glove_manifest)
    datasets = {d.dataset.name: d for d in run.inputs.dataset_inputs}
    assert sorted(datasets) == ["glove path", "texts seed"]
    glove, texts = datasets["glove path"], datasets["texts seed"]
    assert glove.dataset.digest == manifest["vectors_sha256"][:12]
    assert manifest["vectors_sha256"] in glove.dataset.source
    assert texts.dataset.digest == sha256_file(layout.tokens)[:12]
    assert {t.key: t.value for t in texts.tags}["mlflow.data.context"] == "texts"


@pytest.mark.slow
def test_mlflow_ui_opens_on_the_runs_table(result, tmp_path):
    """Headless chromium on a real `python -m pipeline.server`: the link the server prints opens the experiment's
    runs table (the run, its datasets), not the GenAI overview; the logged report shows its figures, loaded from
    the run's artifacts. Screenshots: mlflow_landing.png, mlflow_report.png."""
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.skip("Debian's chromium is not installed (apt-get install -y chromium); .ci/run installs it")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install -e .[test])")
    from test_mlflow_server import Server

    from pipeline.outputs.tracking import log_result
    from pipeline.stages.registry import logged_outputs

    params, layout = result
    server = Server(tmp_path / "server")
    shots = Path(os.environ.get("PE_UI_SCREENSHOTS", tmp_path))
    shots.mkdir(parents=True, exist_ok=True)
    figures = layout.report_html.read_text().count("data:image/png;base64,")
    count_loaded = "b => Array.from(b.ownerDocument.images).filter(i => i.complete && i.naturalWidth > 0).length"
    try:
        os.environ["MLFLOW_TRACKING_URI"] = server.url  # the autouse fixture restores it
        record = log_result(params, layout, REPO, artifacts=logged_outputs())
        landing = re.search(r"browse the runs of positional-encoding: (\S+)", server.log.read_text()).group(1)
        with sync_api.sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=chromium, args=["--no-sandbox", "--disable-gpu"])
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.set_default_timeout(120_000)  # guards a hang: a step takes seconds on a quiet machine
            try:
                page.goto(landing)
                page.get_by_role("link", name=record["run_name"], exact=True).wait_for(state="visible")
                page.get_by_text("glove path").first.wait_for(state="visible")  # the Datasets column
                page.screenshot(path=str(shots / "mlflow_landing.png"))
                heading = page.get_by_role("heading", level=2).first.inner_text()
                landed_on = page.url

                page.goto(
                    f"{server.url}/#/experiments/{record['experiment_id']}/runs/{record['run_id']}"
                    "/artifacts/report.html?workflowType=machine_learning"
                )
                body = page.frame_locator("iframe.mlflow-html-iframe").locator("body")
                body.locator('img[src*="get-artifact"]').first.wait_for(state="attached")
                # guards a hang: the figures load in a second or two from a quiet local server; a loaded machine
                # serves them slower, and the loop ends as soon as they are all there
                deadline = time.monotonic() + 120
                while (loaded := body.evaluate(count_loaded)) < figures and time.monotonic() < deadline:
                    time.sleep(0.5)
                page.screenshot(path=str(shots / "mlflow_report.png"))
            except Exception:
                page.screenshot(path=str(shots / "mlflow_failure.png"))
                print(f"screenshot of the failure: {shots / 'mlflow_failure.png'}")
                raise
            finally:
                browser.close()
    finally:
        server.stop()
    assert f"/experiments/{record['experiment_id']}/runs" in landed_on and heading != "Overview", (landed_on, heading)
    assert loaded == figures  # every figure of the report, loaded from the server
    print(f"screenshots: {shots / 'mlflow_landing.png'}, {shots / 'mlflow_report.png'}")


@pytest.mark.slow
def test_unchanged_inputs_are_not_uploaded_again(result, private_mlflow_store, tmp_path):
    """The DVC path's next run (given the previous run's record) references its unchanged input files instead of
    storing them again; a changed file is uploaded; a deleted holder run means an upload."""
    from mlflow.tracking import MlflowClient

    from pipeline.base.paths import Layout
    from pipeline.outputs.tracking import log_result
    from pipeline.stages.registry import logged_outputs

    from pipeline.config import dump_params

    params, layout = result
    layout.params.write_text(dump_params(params))  # what the Hydra job and DVC path have beside the result
    client = MlflowClient(private_mlflow_store)
    first = log_result(params, layout, REPO, artifacts=logged_outputs())
    inputs = ["encode.json", "manifest.json", "params.yaml", "tokens.json"]
    assert sorted(a.path for a in client.list_artifacts(first["run_id"], "inputs")) == [f"inputs/{n}" for n in inputs]

    second = log_result(params, layout, REPO, artifacts=logged_outputs(), previous=first)
    assert client.list_artifacts(second["run_id"], "inputs") == []
    tags = client.get_run(second["run_id"]).data.tags
    assert {n: tags[f"inputs.{n}"] for n in inputs} == {n: f"runs:/{first['run_id']}/inputs/{n}" for n in inputs}
    assert {n: w["run_id"] for n, w in second["inputs"].items()} == dict.fromkeys(inputs, first["run_id"])

    copy = Layout(tmp_path / "copy", glove=layout.glove_dir)  # the same result with another params.yaml
    shutil.copytree(layout.base, copy.base, ignore=shutil.ignore_patterns("dl"))
    copy.params.write_text(layout.params.read_text() + "# edited\n")
    third = log_result(params, copy, REPO, artifacts=logged_outputs(), previous=second)
    assert [a.path for a in client.list_artifacts(third["run_id"], "inputs")] == ["inputs/params.yaml"]
    client.delete_run(first["run_id"])
    fourth = log_result(
        params, layout, REPO, artifacts=logged_outputs(), previous=third
    )  # params.yaml differs from the third's too
    assert sorted(a.path for a in client.list_artifacts(fourth["run_id"], "inputs")) == [f"inputs/{n}" for n in inputs]


def test_a_sweeps_shared_inputs_are_looked_up_once_a_process(result, private_mlflow_store, monkeypatch):
    """The inputs a sweep's jobs share are logged once, on its parent run; a process that logged them (or found them
    logged) does not ask the store again for its next jobs; another process finds them and logs nothing twice."""
    from mlflow.tracking import MlflowClient

    from pipeline.outputs import tracking

    layout = result[1]
    client = MlflowClient(private_mlflow_store)
    parent = client.create_run(
        client.create_experiment("shared", artifact_location=tracking.artifact_location(private_mlflow_store))
    ).info.run_id
    asked, ask = [], client.list_artifacts
    monkeypatch.setattr(client, "list_artifacts", lambda *args: asked.append(args) or ask(*args))
    folder = tracking._shared_inputs(client, layout, parent)
    assert tracking._shared_inputs(client, layout, parent) == folder and len(asked) == 1
    shared = {f"{folder}/{p.name}" for p in (layout.glove_manifest, layout.tokens, layout.encode_summary)}
    monkeypatch.setattr(tracking, "_SHARED", set())  # another process
    assert tracking._shared_inputs(client, layout, parent) == folder and len(asked) == 2
    monkeypatch.setattr(client, "list_artifacts", ask)
    assert artifact_files(client, parent, folder) == shared


def test_two_jobs_logging_one_new_dataset_at_once_both_link_it(private_mlflow_store):
    """The race a parallel sweep hits: MLflow's store looks a dataset up, then inserts it. Another job inserting
    the same dataset in between (injected here at the first flush) fails the first job's insert on the datasets
    table's UNIQUE constraint; the retry finds the other job's row and both runs link the one dataset."""
    from mlflow.entities import Dataset, DatasetInput
    from mlflow.tracking import MlflowClient
    from sqlalchemy import event
    from sqlalchemy.orm import Session

    from pipeline.outputs.tracking import _log_inputs, artifact_location

    first, other = MlflowClient(private_mlflow_store), MlflowClient(private_mlflow_store)
    experiment = first.create_experiment("race", artifact_location=artifact_location(private_mlflow_store))
    run, other_run = (client.create_run(experiment).info.run_id for client in (first, other))
    datasets = [DatasetInput(Dataset(name="glove 6B-50d", digest="5cee3016e3af", source_type="local", source="{}"))]
    injected = []

    def other_job_inserts_first(session, context, instances):
        if not injected:
            injected.append(True)
            other.log_inputs(other_run, datasets=datasets)

    event.listen(Session, "before_flush", other_job_inserts_first)
    try:
        _log_inputs(first, run, datasets)
    finally:
        event.remove(Session, "before_flush", other_job_inserts_first)
    assert injected
    linked = [first.get_run(r).inputs.dataset_inputs for r in (run, other_run)]
    assert [[(d.dataset.name, d.dataset.digest) for d in inputs] for inputs in linked] == [
        [("glove 6B-50d", "5cee3016e3af")]
    ] * 2


def test_large_files_are_logged_compressed(private_mlflow_store, tmp_path):
    """The MLflow budget: a file above COMPRESS_ABOVE (the per-sentence table, the tokens of thousands of sentences)
    is logged as <name>.gz that unpacks to the same bytes, and the same file twice gives the same bytes; a small
    file is logged as it is."""
    import gzip

    from mlflow.tracking import MlflowClient

    from pipeline.outputs.tracking import COMPRESS_ABOVE, _log_file, artifact_location

    client = MlflowClient(private_mlflow_store)
    run_id = client.create_run(
        client.create_experiment("budget", artifact_location=artifact_location(private_mlflow_store))
    ).info.run_id
    rows = "".join(f"s{i},{i * 0.001:.6f},{i % 7}\n" for i in range(COMPRESS_ABOVE // 12))
    big, small = tmp_path / "sentences.csv", tmp_path / "metrics.json"
    big.write_text("sentence,r_star,neighbours\n" + rows)
    small.write_text('{"r_star": 1.5}')
    for folder in ("a", "b"):
        _log_file(client, run_id, big, folder)
    _log_file(client, run_id, small, None)
    assert artifact_files(client, run_id) == {"a/sentences.csv.gz", "b/sentences.csv.gz", "metrics.json"}
    packed = [Path(client.download_artifacts(run_id, f"{f}/sentences.csv.gz", str(tmp_path / f))) for f in "ab"]
    assert packed[0].read_bytes() == packed[1].read_bytes()  # no time or name in the gzip header
    assert gzip.decompress(packed[0].read_bytes()) == big.read_bytes()
    assert packed[0].stat().st_size < big.stat().st_size / 3
