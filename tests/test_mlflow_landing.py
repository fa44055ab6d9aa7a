"""Issue 23: MLflow lands on the runs. Headless Debian chromium on a real `python -m pipeline.server`: the link the
server prints (with its actual port) opens the runs table in model-training mode with r* among the columns; the
bare URL, the experiment link and a run link open in model-training mode once the browser chose it (MLflow 3.17
keeps that choice per browser: no server or experiment setting decides it). Screenshots: mlflow_landing_*.png."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium")
METRICS = {"crossover.s0.r_star": 1.3047, "crossover.s1.r_star": 1.3551, "encoding.norm_max_abs_dev": 4.837e-08}


def test_printed_link_opens_the_view_the_experiment_holds(private_mlflow_store):
    """The link names the view (viewStateShareKey) that the experiment's tag holds, with the r* columns."""
    import json

    from mlflow.tracking import MlflowClient

    from conftest import REPO
    from pipeline.outputs.tracking import RUNS_VIEW, RUNS_VIEW_TAG, prepare_store, runs_page

    experiment_id = prepare_store(private_mlflow_store, "landing", REPO)
    view = json.loads(MlflowClient(private_mlflow_store).get_experiment(experiment_id).tags[RUNS_VIEW_TAG])
    assert {f"metrics.`{name}`" for name in METRICS} <= set(view["selectedColumns"])
    link = runs_page("http://127.0.0.1:5123", experiment_id)
    assert link.startswith(f"http://127.0.0.1:5123/#/experiments/{experiment_id}/runs?")
    assert "workflowType=machine_learning" in link and f"viewStateShareKey={RUNS_VIEW}" in link


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (apt-get install chromium); .ci/run installs it")
def test_mlflow_lands_on_the_runs_table_in_chromium(tmp_path):
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install -e .[test])")
    from mlflow.tracking import MlflowClient
    from test_mlflow_server import Server

    server = Server(tmp_path / "server")
    shots = Path(os.environ.get("PE_UI_SCREENSHOTS", tmp_path))
    shots.mkdir(parents=True, exist_ok=True)
    seen = {}
    try:
        printed = re.search(r"browse the runs of positional-encoding: (\S+)", server.log.read_text()).group(1)
        client = MlflowClient(server.url)
        experiment_id = client.get_experiment_by_name("positional-encoding").experiment_id
        run = client.create_run(experiment_id, run_name="6B-50d seed sinusoidal · 3f2a9c")
        for name, value in METRICS.items():
            client.log_metric(run.info.run_id, name, value)
        client.set_terminated(run.info.run_id)
        with sync_api.sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
            page = browser.new_page(viewport={"width": 1600, "height": 900})  # a fresh profile: no choice made yet
            page.set_default_timeout(30_000)
            try:
                page.goto(printed)
                page.get_by_role("columnheader", name="crossover.s0.r_star").first.wait_for(state="visible")
                page.get_by_role("link", name=run.info.run_name, exact=True).wait_for(state="visible")
                page.screenshot(path=str(shots / "mlflow_landing_printed.png"))
                seen["printed"] = page.inner_text("body")

                page.goto(server.url)  # the bare URL, after a visit in model-training mode: still the browser's
                page.get_by_text("Model training", exact=True).click()  # the one choice MLflow remembers
                page.get_by_role("link", name="Experiments").first.wait_for(state="visible")
                page.screenshot(path=str(shots / "mlflow_landing_bare.png"))
                seen["bare"] = page.inner_text("body")

                page.goto(f"{server.url}/#/experiments/{experiment_id}")
                page.get_by_role("link", name=run.info.run_name, exact=True).wait_for(state="visible")
                page.screenshot(path=str(shots / "mlflow_landing_experiment.png"))
                seen["experiment"] = (page.url, page.inner_text("body"))

                page.goto(f"{server.url}/#/experiments/{experiment_id}/runs/{run.info.run_id}")
                page.get_by_text("4.837e-8").first.wait_for(state="visible")
                page.screenshot(path=str(shots / "mlflow_landing_run.png"))
                seen["run"] = page.inner_text("body")
            except Exception:
                page.screenshot(path=str(shots / "mlflow_landing_failure.png"))
                print(f"screenshot of the failure: {shots / 'mlflow_landing_failure.png'}")
                raise
            finally:
                browser.close()
    finally:
        server.stop()
    assert printed.startswith(server.url + "/#/")  # the server's actual port
    assert "crossover.s1.r_star" in seen["printed"] and "1.3551" in seen["printed"]
    assert "Traces\n0" not in seen["bare"]
    url, text = seen["experiment"]
    assert f"/experiments/{experiment_id}/runs" in url and "Overview" not in text.split("Runs")[0], url
    assert "Evaluations" not in seen["run"] and "Judges" not in seen["run"]  # not the GenAI run page
    print(f"screenshots: {', '.join(str(shots / f'mlflow_landing_{n}.png') for n in seen)}")
