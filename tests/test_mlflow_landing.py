"""Issue 23: MLflow lands on the runs. The link `python -m pipeline.server` prints names its actual port (a port it
cannot listen on is refused before any link is printed) and opens the runs table in model-training mode with r* among
the columns. Everything else is MLflow 3.17.2's rule, checked here in headless Debian chromium so that docs/mlflow.md
stays exact: the UI's mode is the URL's `workflowType`, else the one the browser picked in the
sidebar, else GenAI; the URL's is not kept (a run opened from the runs table is in GenAI mode), no server or
experiment setting changes the default. Screenshots: mlflow_landing_*.png (PE_UI_SCREENSHOTS keeps them)."""

from __future__ import annotations

import os
import re
import shutil
import socket
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
    # issue 36: first after the run's name (MLflow's columnOrder), so that a 1,400 px window shows them
    order = view["columnOrder"]
    assert order[1] == "metrics.`crossover.s0.r_star`" and {f"metrics.`{name}`" for name in METRICS} <= set(order)
    assert all(column.startswith("metrics.") for column in order[1:] if column != "attributes.`Dataset`")
    link = runs_page("http://127.0.0.1:5123", experiment_id)
    assert link.startswith(f"http://127.0.0.1:5123/#/experiments/{experiment_id}/runs?")
    assert "workflowType=machine_learning" in link and f"viewStateShareKey={RUNS_VIEW}" in link


def test_a_port_the_server_cannot_listen_on_is_refused_before_any_link(tmp_path, capsys):
    """A port in use (another server: its link would open that one) or port 0: exit 2, one message with the fix,
    no link printed, the store not touched."""
    from pipeline.server import main

    store = tmp_path / "mlflow.db"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["--port", str(port), "--backend-store-uri", f"sqlite:///{store}"]) == 2
    out, err = capsys.readouterr()
    assert f"127.0.0.1:{port} is in use" in err and f"--port {port + 1}" in err and not out
    assert main(["--port", "0", "--backend-store-uri", f"sqlite:///{store}"]) == 2
    out, err = capsys.readouterr()
    assert "--port 0: expected a port from 1 to 65535" in err and not out
    assert not store.exists()


def in_model_training(page) -> bool:
    """Whether MLflow's UI shows its model-training mode: its sidebar has "Model registry" only then."""
    return page.get_by_role("link", name="Model registry", exact=True).count() > 0


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (apt-get install chromium); .ci/run installs it")
def test_mlflow_ui_modes_in_chromium(tmp_path):
    """One fresh chromium profile on a real `python -m pipeline.server`: the bare URL, an experiment link and a run
    link open in GenAI mode; the printed link opens the runs table in model-training mode with r* among the columns;
    a run opened from that table is in GenAI mode again (a click on "Model training" there, already selected, stores
    nothing); after one click on it in a GenAI page the three open in model-training mode (the bare URL on MLflow's
    home, the experiment link on its runs table with the browser's own columns, which "Override saved view" on the
    printed link makes the r* ones)."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install -e .[test])")
    from mlflow.tracking import MlflowClient
    from test_mlflow_server import Server

    server = Server(tmp_path / "server")
    shots = Path(os.environ.get("PE_UI_SCREENSHOTS", tmp_path))
    shots.mkdir(parents=True, exist_ok=True)
    seen = {}  # step -> (url, model-training mode?)
    extra = {}
    try:
        printed = re.search(r"browse the runs of positional-encoding: (\S+)", server.log.read_text()).group(1)
        client = MlflowClient(server.url)
        experiment_id = client.get_experiment_by_name("positional-encoding").experiment_id
        run = client.create_run(experiment_id, run_name="6B-50d seed sinusoidal · 3f2a9c")
        for name, value in METRICS.items():
            client.log_metric(run.info.run_id, name, value)
        client.set_terminated(run.info.run_id)
        experiment_link = f"{server.url}/#/experiments/{experiment_id}"
        run_link = f"{experiment_link}/runs/{run.info.run_id}"
        with sync_api.sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
            page = browser.new_page(viewport={"width": 1600, "height": 900})  # a fresh profile: no choice made yet
            page.set_default_timeout(120_000)  # guards a hang: a step takes seconds on a quiet machine
            run_name = page.get_by_role("link", name=run.info.run_name, exact=True)
            experiment_name = page.get_by_role("link", name="positional-encoding", exact=True).first

            def run_page_under(tab: str):
                """A link to the run's list (breadcrumb, sidebar): "Evaluations" in GenAI mode, "Runs" in model training."""
                return page.get_by_role("link", name=tab, exact=True).first

            def step(name: str) -> None:
                page.screenshot(path=str(shots / f"mlflow_landing_{name}.png"))
                seen[name] = (page.url, in_model_training(page))

            try:
                page.goto(server.url)
                page.get_by_text("Welcome to MLflow", exact=True).wait_for(state="visible")
                experiment_name.wait_for(state="visible")  # the home page's recent experiments
                step("fresh_bare")
                page.goto(experiment_link)
                page.wait_for_url(re.compile(r"/overview"))
                page.get_by_text("Usage", exact=True).first.wait_for(state="visible")  # the GenAI overview's tab
                step("fresh_experiment")
                page.goto(run_link)
                run_page_under("Evaluations").wait_for(state="visible")
                step("fresh_run")

                page.goto(printed)
                page.get_by_role("columnheader", name="crossover.s0.r_star").first.wait_for(state="visible")
                run_name.wait_for(state="visible")
                step("printed")
                extra["printed_text"] = page.inner_text("body")
                page.get_by_text("Model training", exact=True).click()  # already the URL's mode: nothing is stored
                run_name.click()  # the link of the runs table carries no workflowType
                run_page_under("Evaluations").wait_for(state="visible")
                step("run_from_table")

                page.get_by_text("Model training", exact=True).click()  # the one choice MLflow keeps
                run_name.wait_for(state="visible")
                page.goto(server.url)
                page.get_by_text("Welcome to MLflow", exact=True).wait_for(state="visible")
                experiment_name.wait_for(state="visible")
                step("chosen_bare")
                page.goto(experiment_link)
                run_name.wait_for(state="visible")
                step("chosen_experiment")
                extra["r_star_columns"] = page.get_by_role("columnheader", name="crossover.s0.r_star").count()
                page.goto(run_link)
                page.get_by_text("4.837e-8").first.wait_for(state="visible")
                run_page_under("Runs").wait_for(state="visible")
                step("chosen_run")
                page.goto(printed)
                page.get_by_role("button", name="Override saved view").click()  # the shared view becomes this browser's
                page.goto(experiment_link)
                page.get_by_role("columnheader", name="crossover.s0.r_star").first.wait_for(state="visible")
                page.screenshot(path=str(shots / "mlflow_landing_own_view.png"))
            except Exception:
                page.screenshot(path=str(shots / "mlflow_landing_failure.png"))
                print(f"screenshot of the failure: {shots / 'mlflow_landing_failure.png'}")
                raise
            finally:
                browser.close()
    finally:
        server.stop()
    assert printed.startswith(server.url + "/#/")  # the server's actual port
    assert "crossover.s1.r_star" in extra["printed_text"] and "1.3551" in extra["printed_text"]
    assert {name: mode for name, (_, mode) in seen.items()} == {
        "fresh_bare": False,
        "fresh_experiment": False,
        "fresh_run": False,
        "printed": True,
        "run_from_table": False,
        "chosen_bare": True,
        "chosen_experiment": True,
        "chosen_run": True,
    }, seen
    assert "workflowType=genai" in seen["fresh_experiment"][0]
    assert f"/experiments/{experiment_id}/runs?" in seen["chosen_experiment"][0]
    assert extra["r_star_columns"] == 0  # the browser's own columns, until "Override saved view" on the printed link
    print(f"screenshots: {', '.join(str(shots / f'mlflow_landing_{n}.png') for n in [*seen, 'own_view'])}")
