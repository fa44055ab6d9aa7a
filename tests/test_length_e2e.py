"""The length experiment for real, in a fresh copy of the project: `dvc repro` in its own DVC project
(experiments/length/), which the pipeline's DVC never sees, and a Hydra multirun on the parallel launcher, each
logging one MLflow parent run with a run per family (into the test's private store)."""

from __future__ import annotations

import json
import sys

import pytest

from conftest import run

PY = sys.executable
# seconds of training: copy, one seed, lengths 1-4 trained and 1-8 tested, a 16-wide one-layer model, 100 steps
TINY = [
    "length=quick",
    "length.train.steps=100",
    "length.train.checkpoint_every=100",
    "length.model.d_model=16",
    "length.model.heads=2",
    "length.model.layers=1",
    "length.train_length=4",
    "length.test_factor=2",
    "length.eval_batch=8",
]


def mlflow_runs(uri: str) -> list:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name("length-generalisation")
    return client.search_runs([experiment.experiment_id]) if experiment else []


def families_under_one_parent(uri: str) -> dict[str, str]:
    runs = mlflow_runs(uri)
    parents = {r.data.tags.get("mlflow.parentRunId") for r in runs} - {None}
    assert len(parents) == 1, parents
    children = {r.data.tags["family"]: r.info.run_id for r in runs if r.data.tags.get("mlflow.parentRunId")}
    assert all(r.info.status == "FINISHED" for r in runs)
    return children


@pytest.mark.slow
def test_dvc_repro_in_its_own_project(checkout, private_mlflow_store):
    sub = checkout / "experiments" / "length"
    run([PY, "-m", "pipeline.compose", "--length", *TINY], checkout)
    first = run(["dvc", "repro"], sub)
    assert "Running stage 'length'" in first.stdout and "6 run(s), 0 in the store" in first.stderr
    summary = json.loads((sub / "results" / "summary.json").read_text())
    assert list(summary["tasks"]["copy"])[:6] == ["sinusoidal", "learned", "rope", "alibi", "nope", "randomized"]
    assert list(summary["tasks"]["copy"])[6:] == [f"rope_{n}_{s}x" for n in ("pi", "ntk", "yarn") for s in (2, 3)]
    assert summary["buckets"] == {"1-4": [1, 4], "5-8": [5, 8]}
    assert json.loads(run(["dvc", "status", "--json"], sub).stdout) == {}
    # the bytecode Python writes beside the code (its deps lie above this project's root, where no .dvcignore applies)
    cache = checkout / "pipeline" / "core" / "__pycache__"
    cache.mkdir(exist_ok=True)
    (cache / "alibi.cpython-311.pyc").write_bytes(b"bytecode")
    assert json.loads(run(["dvc", "status", "--json"], sub).stdout) == {}
    assert not any("length" in stage for stage in json.loads(run(["dvc", "status", "--json"], checkout).stdout))
    children = families_under_one_parent(private_mlflow_store)
    assert sorted(children)[:6] == ["alibi", "learned", "nope", "randomized", "rope", "rope_ntk_2x"]

    # what does not decide a run's result re-runs the stage from the run store: nothing trained again
    figure = checkout / "pipeline" / "length" / "figure.py"
    figure.write_text(figure.read_text() + "# an edit\n")
    again = run(["dvc", "repro"], sub)
    assert "6 run(s), 6 in the store" in again.stderr and "0 to train" in again.stderr
    assert json.loads((sub / "results" / "summary.json").read_text()) == summary

    # a stage that refuses its params under a plain `dvc repro` keeps the results: DVC leaves the folder in place
    # (persist) and the stage replaces it whole only when it succeeds
    before = {path.name: path.read_bytes() for path in (sub / "results").iterdir()}
    params = sub / "params.yaml"
    params.write_text(params.read_text().replace("d_model: 16", "d_model: 20"))
    refused = run(["dvc", "repro"], sub, check=False)
    assert refused.returncode != 0 and "is not what composing wrote" in refused.stderr, refused.stderr
    assert "`python -m pipeline.compose --length length=quick " in refused.stderr  # its own command, overrides kept
    assert {path.name: path.read_bytes() for path in (sub / "results").iterdir()} == before


@pytest.mark.slow
def test_a_parallel_multirun_gathers_its_jobs_runs(checkout, private_mlflow_store, tmp_path):
    sweep = tmp_path / "sweep"
    done = run(
        [PY, "-m", "pipeline.length", "-m", "hydra/launcher=parallel", "length.families=[alibi],[nope]"]
        + ["length.seeds=[0],[1]", *TINY, f"hydra.sweep.dir={sweep}"],
        checkout,
    )
    assert "sweep: 4 jobs, 4 finished, 0 failed" in done.stderr + done.stdout
    summary = json.loads((sweep / "results" / "summary.json").read_text())
    assert summary["experiment"]["families"] == ["alibi", "nope"] and summary["experiment"]["seeds"] == [0, 1]
    assert summary["tasks"]["copy"]["alibi"]["token_accuracy"]["1-4"]["std"] > 0  # two seeds gathered
    assert sorted(families_under_one_parent(private_mlflow_store)) == ["alibi", "nope"]


def test_a_bad_length_override_is_one_error_and_writes_nothing(checkout):
    params = checkout / "experiments" / "length" / "params.yaml"
    before = params.read_bytes()
    done = run([PY, "-m", "pipeline.compose", "--length", "length.model.d_model=20"], checkout, check=False)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "config key length.model.d_model = 20 is invalid: it must be a multiple of 2 x length.model.heads" in (
        done.stderr
    )
    assert params.read_bytes() == before
