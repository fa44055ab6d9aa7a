"""The real thing: `dvc repro` and `dvc exp run` in a fresh copy of the project, logging to a private MLflow store.
(Hydra multirun sweeps, DVC queues and the MLflow server: tests/test_sweeps.py, tests/test_mlflow_server.py.)"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

from conftest import REPO, run

pytestmark = pytest.mark.slow
PY = sys.executable


def mlflow_runs(uri: str, experiment: str = "positional-encoding"):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    exp = client.get_experiment_by_name(experiment)
    assert exp is not None, f"no experiment {experiment!r} in {uri}"
    return client, exp, client.search_runs([exp.experiment_id], order_by=["attributes.start_time ASC"])


def output_hashes(checkout: Path) -> dict[str, str]:
    """{output path: md5} of every stage output recorded in dvc.lock."""
    lock = yaml.safe_load((checkout / "dvc.lock").read_text())
    return {out["path"]: out["md5"] for stage in lock["stages"].values() for out in stage.get("outs", [])}


def ran_stages(output: str) -> list[str]:
    return [line.split("'")[1] for line in output.splitlines() if line.startswith("Running stage '")]


def test_dvc_repro_end_to_end(checkout, private_mlflow_store):
    """README's main command in a fresh clone: every stage runs, outputs and the MLflow run are complete,
    a second repro does nothing, a sweep change re-runs only what depends on it, a stale params.yaml stops it."""
    first = run([PY, "-m", "pipeline.repro"], checkout)
    # figures are kept in git: when the recomputed data hash as in dvc.lock, the committed ones are current
    assert [s for s in ran_stages(first.stdout) if s not in ("figures", "report")] == [
        "check_params", "glove", "tokenize", "encode", "sweep", "track"]

    manifest = json.loads((checkout / "data/glove/manifest.json").read_text())
    assert (manifest["rows"], manifest["dim"], manifest["origin"]["source"]) == (400000, 50, "package")
    tokens = json.loads((checkout / "data/tokens/tokens.json").read_text())
    assert tokens["sequences"][1] == [3, 2, 11, 8, 10, 5, 4, 7, 1, 9, 6]

    metrics = json.loads((checkout / "reports/metrics.json").read_text())
    committed = json.loads((REPO / "reports/metrics.json").read_text())
    assert metrics.keys() == committed.keys()
    assert metrics["embedding"] == {"vocab_size": 11, "oov_count": 0}
    assert metrics["encoding"]["norm_max_abs_dev"] < 1e-6 and metrics["encoding"]["offset_distance_max_spread"] < 1e-6
    assert metrics["sweep"]["s1"]["w1_1-w2_10"]["pca_disparity"] == pytest.approx(
        committed["sweep"]["s1"]["w1_1-w2_10"]["pca_disparity"], abs=1e-6)
    figures = sorted(p.name for p in (checkout / "reports/figures").glob("*.png"))
    assert len(figures) == 26

    record = json.loads((checkout / "reports/mlflow_last_run.json").read_text())
    assert json.loads((checkout / "reports/mlflow_run.json").read_text()) == {
        "logged": True, "experiment": "positional-encoding"}
    assert record["tracking_uri"] == private_mlflow_store
    client, exp, runs = mlflow_runs(private_mlflow_store)
    assert [r.info.run_id for r in runs] == [record["run_id"]]
    logged = runs[0]
    assert logged.info.status == "FINISHED"
    assert logged.data.params["glove.name"] == "6B-50d" and logged.data.params["tokenizer.maxlen"] == "100"
    assert logged.data.metrics["encoding.norm_max_abs_dev"] == pytest.approx(metrics["encoding"]["norm_max_abs_dev"])
    assert "sweep.s1.w1_1-w2_10.pca_disparity" in logged.data.metrics
    assert len(logged.data.tags["git_commit"]) >= 40
    artifacts = {a.path for a in client.list_artifacts(logged.info.run_id, "figures")}
    assert "figures/projection_s1_w1_1-w2_10.png" in artifacts and len(artifacts) == 26
    assert "report.html" in {a.path for a in client.list_artifacts(logged.info.run_id)}
    assert exp.artifact_location.startswith("file://") or private_mlflow_store.startswith("http")

    again = run(["dvc", "repro"], checkout)
    assert ran_stages(again.stdout) == [] and "up to date" in again.stdout

    # every output, data and reports alike, is reproduced bit for bit by a forced re-run
    before = output_hashes(checkout)
    run(["dvc", "repro", "-f"], checkout)
    assert output_hashes(checkout) == before and len(before) >= 9

    changed = run([PY, "-m", "pipeline.repro", "sweep.w2=10"], checkout)
    assert ran_stages(changed.stdout) == ["check_params", "sweep", "figures", "report", "track"]
    assert run(["dvc", "metrics", "diff", "HEAD", "--md"], checkout).stdout.count("pca_disparity") > 0
    assert len(mlflow_runs(private_mlflow_store)[2]) == 3        # first run, forced re-run, sweep change

    # conf/ edited after params.yaml was composed, then plain `dvc repro`: refused, nothing else runs
    sweep_conf = checkout / "conf/sweep/seed.yaml"
    sweep_conf.write_text(sweep_conf.read_text().replace("w1: [1, 1, 10, sqrt_d]", "w1: [1, 1, 10, 3]"))
    stale = run(["dvc", "repro"], checkout, check=False)
    assert stale.returncode != 0
    assert "params.yaml is stale" in stale.stderr and "sweep.w1" in stale.stderr and "Traceback" not in stale.stderr
    assert ran_stages(stale.stdout) == ["check_params"]


def test_dvc_exp_run_with_set_param(checkout, private_mlflow_store):
    """`dvc exp run -S` composes conf/ through DVC's Hydra integration; `dvc exp show` lists the metrics."""
    run([PY, "-m", "pipeline.repro"], checkout)
    run(["git", "add", "-A"], checkout)
    run(["git", "commit", "-qm", "baseline", "--allow-empty"], checkout, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@l",
        GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@l")
    exp = run(["dvc", "exp", "run", "-S", "texts=file", "-S", "sweep.w2=5"], checkout)
    assert "glove" not in ran_stages(exp.stdout) and "tokenize" in ran_stages(exp.stdout)
    params = yaml.safe_load((checkout / "params.yaml").read_text())
    assert params["texts"]["name"] == "file" and params["sweep"]["w2"] == 5
    shown = json.loads(run(["dvc", "exp", "show", "--json"], checkout).stdout)
    assert "pca_disparity" in json.dumps(shown)
    _, _, runs = mlflow_runs(private_mlflow_store)
    assert runs[-1].data.params["texts.name"] == "file" and runs[-1].data.tags.get("dvc_exp_name")
