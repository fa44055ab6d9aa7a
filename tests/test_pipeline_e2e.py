"""The real thing: `dvc repro` and `dvc exp run` in a fresh copy of the project, logging to a private MLflow store.
(Hydra multirun sweeps, DVC queues and the MLflow server: tests/test_sweeps.py, tests/test_mlflow_server.py.)"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
import yaml

from conftest import REPO, copy_project, model_figures, run

pytestmark = pytest.mark.slow
PY = sys.executable
GIT_ID = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@l", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@l"}


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


def git_status(checkout: Path) -> str:
    return run(["git", "status", "--porcelain"], checkout).stdout


def ran_stages(output: str) -> list[str]:
    return [line.split("'")[1] for line in output.splitlines() if line.startswith("Running stage '")]


def test_dvc_repro_end_to_end(ran_project, tmp_path, private_mlflow_store):
    """README's main command in a fresh clone (the run `ran_project` made, looked at, never changed): every stage
    runs, outputs and the MLflow run are complete, the tracked files come out byte-identical (git status clean);
    then in a copy, a second repro does nothing, a sweep change re-runs only what depends on it, a stale
    params.yaml stops it."""
    checkout, first, first_store = ran_project
    # tokenize first (dvc.yaml's order): it checks the tracking store before anything is computed
    assert ran_stages(first.stdout) == ["tokenize", "glove", "encode", "sweep", "figures"]
    assert git_status(checkout) == "", "the README's first command changed tracked files"

    manifest = json.loads((checkout / "data/glove/manifest.json").read_text())
    assert (manifest["rows"], manifest["dim"], manifest["origin"]["source"]) == (400000, 50, "package")
    tokens = json.loads((checkout / "data/tokens/tokens.json").read_text())
    assert tokens["sequences"][1] == [3, 2, 11, 8, 10, 5, 4, 7, 1, 9, 6]

    metrics = json.loads((checkout / "reports/metrics.json").read_text())
    committed = json.loads((REPO / "reports/metrics.json").read_text())
    assert metrics.keys() == committed.keys()
    assert metrics["embedding"] == {"vocab_size": 11, "oov_count": 0, "oov_share": 0.0}
    # the float32 table's rounding (3e-8 an entry); and the committed disparity, which the same code reproduces to
    # the bit on every machine (tests/test_machine_independence.py): 1e-6 only says which number is meant
    assert metrics["encoding"]["norm_max_abs_dev"] < 1e-6 and metrics["encoding"]["offset_distance_max_spread"] < 1e-6
    assert metrics["sweep"]["s1"]["w1_1-w2_10"]["pca_disparity"] == pytest.approx(
        committed["sweep"]["s1"]["w1_1-w2_10"]["pca_disparity"], abs=1e-6
    )
    from pipeline.core.sweep import headline

    assert json.loads((checkout / "reports/headline.json").read_text()) == headline(metrics)
    figures = sorted(p.name for p in (checkout / "reports/figures").glob("*/*.png"))
    assert len(figures) == 32 + model_figures()  # 18 of the encode stage (19 with .[models]), 14 of the sweep's

    record = json.loads((checkout / "reports/mlflow_last_run.json").read_text())
    assert json.loads((checkout / "reports/mlflow_run.json").read_text()) == {
        "logged": True,
        "experiment": "positional-encoding",
    }
    assert record["tracking_uri"] == first_store
    client, exp, runs = mlflow_runs(first_store)
    assert [r.info.run_id for r in runs] == [record["run_id"]]
    logged = runs[0]
    assert logged.info.status == "FINISHED"
    assert logged.info.run_name == "defaults"  # what sets it apart from conf/'s defaults: nothing
    # the run spans the repro (from this repro's first stage output), not only the stage that logs it
    assert logged.info.start_time <= (checkout / "data/glove/manifest.json").stat().st_mtime * 1000
    assert {d.dataset.name for d in logged.inputs.dataset_inputs} == {"glove 6B-50d", "texts seed"}
    assert logged.data.params["glove.name"] == "6B-50d" and logged.data.params["tokenizer.maxlen"] == "100"
    assert logged.data.metrics["encoding.norm_max_abs_dev"] == pytest.approx(metrics["encoding"]["norm_max_abs_dev"])
    assert "sweep.s1.w1_1-w2_10.pca_disparity" in logged.data.metrics
    assert len(logged.data.tags["git_commit"]) >= 40
    artifacts = {a.path for a in client.list_artifacts(logged.info.run_id, "figures")}
    assert "figures/projection_s1_w1_1-w2_10.png" in artifacts and len(artifacts) == 32 + model_figures()
    assert "report.html" in {a.path for a in client.list_artifacts(logged.info.run_id)}
    assert exp.artifact_location.startswith("file://")

    checkout = copy_project(checkout, tmp_path / "project")
    # a module of a library package: dvc status names exactly the stages whose code deps reach that package (a
    # directory dep, pipeline/dvcyaml.py), and Python's rewritten bytecode (__pycache__, .dvcignore) changes nothing
    from pipeline.dvcyaml import code_deps
    from pipeline.stages.registry import STAGES

    module = Path("pipeline/outputs/report.py")
    importers = sorted(s.name for s in STAGES if "pipeline/outputs" in code_deps(s.module, checkout))
    assert "figures" in importers and "glove" not in importers
    original = (checkout / module).read_text()
    (checkout / module).write_text(original + "# an edit\n")
    status = json.loads(run(["dvc", "status", "--json"], checkout).stdout)
    assert sorted(status) == importers and "pipeline/outputs" in json.dumps(status["figures"])
    (checkout / module).write_text(original)
    (checkout / "pipeline/outputs/__pycache__").mkdir(exist_ok=True)
    (checkout / "pipeline/outputs/__pycache__/report.cpython-311.pyc").write_bytes(b"new bytecode")
    assert json.loads(run(["dvc", "status", "--json"], checkout).stdout) == {}

    again = run(["dvc", "repro"], checkout)
    assert ran_stages(again.stdout) == [] and "up to date" in again.stdout

    # every output, data and reports alike, is reproduced bit for bit by a forced re-run
    before = output_hashes(checkout)
    run(["dvc", "repro", "-f"], checkout)
    assert output_hashes(checkout) == before and len(before) >= 9

    changed = run([PY, "-m", "pipeline.repro", "sweep.w2=10"], checkout)
    assert ran_stages(changed.stdout) == ["sweep", "figures"]
    # DVC's metric is the headline; the full table is a target away
    assert "reports/headline.json" in (shown := run(["dvc", "metrics", "show", "--json"], checkout).stdout)
    assert "reports/metrics.json" not in shown and "pca_disparity" not in shown
    full_diff = run(["dvc", "metrics", "diff", "HEAD", "--md", "--targets", "reports/metrics.json"], checkout).stdout
    assert full_diff.count("pca_disparity") > 0
    assert len(mlflow_runs(private_mlflow_store)[2]) == 2  # the copy's forced re-run and sweep change

    # conf/ edited after params.yaml was composed, then plain `dvc repro`: refused, nothing else runs
    sweep_conf = checkout / "conf/sweep/seed.yaml"
    sweep_conf.write_text(sweep_conf.read_text().replace("w1: [1, 1, 10, sqrt_d]", "w1: [1, 1, 10, 3]"))
    stale = run(["dvc", "repro"], checkout, check=False)
    assert stale.returncode != 0
    assert "params.yaml is stale" in stale.stderr and "sweep.w1" in stale.stderr and "Traceback" not in stale.stderr
    assert ran_stages(stale.stdout) == ["tokenize"]  # the stage that depends on conf/
    assert "error in stage tokenize: params.yaml is stale" in stale.stderr


def test_dvc_exp_run_with_set_param(ran_checkout, private_mlflow_store):
    """`dvc exp run -S` composes conf/ through DVC's Hydra integration; `dvc exp show` lists the metrics."""
    checkout = ran_checkout
    run(["git", "add", "-A"], checkout)
    run(
        ["git", "commit", "-qm", "baseline", "--allow-empty"],
        checkout,
        GIT_AUTHOR_NAME="t",
        GIT_AUTHOR_EMAIL="t@l",
        GIT_COMMITTER_NAME="t",
        GIT_COMMITTER_EMAIL="t@l",
    )
    exp = run(["dvc", "exp", "run", "-S", "texts=file", "-S", "sweep.w2=5"], checkout)
    assert "glove" not in ran_stages(exp.stdout) and "tokenize" in ran_stages(exp.stdout)
    params = yaml.safe_load((checkout / "params.yaml").read_text())
    assert params["texts"]["name"] == "file" and params["sweep"]["w2"] == 5
    shown = json.loads(run(["dvc", "exp", "show", "--json"], checkout).stdout)
    assert "r_star.s0" in json.dumps(shown) and "reports/headline.json" in json.dumps(shown)
    _, _, runs = mlflow_runs(private_mlflow_store)
    assert runs[-1].data.params["texts.name"] == "file" and runs[-1].data.tags.get("dvc_exp_name")

    # the project's view of the table: two experiments side by side fit 160 columns, every cell readable
    run(["dvc", "exp", "run", "-S", "sweep.w2=3"], checkout)
    wide = run([PY, "-m", "pipeline.experiments"], checkout, COLUMNS="1000").stdout
    lines = [line.rstrip() for line in wide.splitlines() if line.strip()]
    header = lines[0].split()
    assert header[:2] == ["Experiment", "Created"] and {"r_star.s0", "r_star.s1", "texts.name", "sweep.w2"} <= set(
        header
    ), wide
    assert not any(name.startswith(("pipeline/", "conf", "data/", "encoding.", "tutorials.")) for name in header)
    assert sum(line.lstrip().startswith(("├──", "└──")) for line in lines) == 2, wide  # the two experiments
    assert max(map(len, lines)) <= 160, wide
    assert "…" not in run([PY, "-m", "pipeline.experiments"], checkout, COLUMNS="160").stdout
    plain = run(["dvc", "exp", "show", "--no-pager"], checkout, COLUMNS="160").stdout
    assert "…" in plain  # what the view spares the user


# ---------------------------------------------------------------- a failed run changes nothing


def tree_state(checkout: Path) -> dict[str, bytes]:
    """Bytes of params.yaml, dvc.lock and every file under data/ (but the download cache and the user's texts)
    and reports/."""
    files = [checkout / "params.yaml", checkout / "dvc.lock"]
    for top in ("data", "reports"):
        files += [
            p
            for p in (checkout / top).rglob("*")
            if p.is_file() and not p.relative_to(checkout).as_posix().startswith(("data/cache/", "data/texts/"))
        ]
    return {p.relative_to(checkout).as_posix(): p.read_bytes() for p in files}


@pytest.fixture(scope="module")
def reproduced(ran_project, tmp_path_factory):
    """A fresh clone after the README's first command (these tests look at files; their runs log nothing)."""
    from conftest import copy_project

    return copy_project(ran_project[0], tmp_path_factory.mktemp("reproduced") / "project")


BAD_INPUTS = {
    "empty texts file": ("empty.txt", b"", r"texts\.file"),
    "only comments": ("comments.txt", b"# nothing here\n\n", r"texts\.file"),
    "non-UTF-8 texts": ("latin1.txt", "caf\xe9 cr\xe8me br\xfbl\xe9e\n".encode("latin-1"), r"UTF-8"),
    "every word unknown to GloVe": ("unknown.txt", b"zqxv wvvkq\nking queen\n", r"every word of sentence 0"),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_texts_file_fails_with_exit_2_and_changes_nothing(reproduced, case):
    name, content, message = BAD_INPUTS[case]
    (reproduced / "data/texts" / name).write_bytes(content)
    before = tree_state(reproduced)
    result = run(
        [PY, "-m", "pipeline.repro", "tracking=disabled", "texts=file", f"texts.file=data/texts/{name}"],
        reproduced,
        check=False,
    )
    (reproduced / "data/texts" / name).unlink()
    assert result.returncode == 2, result.stderr
    assert re.search(message, result.stderr) and "Traceback" not in result.stderr
    after = tree_state(reproduced)
    assert sorted(after) == sorted(before) and [k for k in before if before[k] != after[k]] == []
    assert json.loads(run(["dvc", "status", "--json"], reproduced).stdout) == {}


def test_missing_glove_path_fails_with_exit_2_and_changes_nothing(reproduced):
    before = tree_state(reproduced)
    result = run(
        [
            PY,
            "-m",
            "pipeline.repro",
            "tracking=disabled",
            "glove=path",
            "glove.path=/nonexistent/g.txt",
            "glove.dim=50",
        ],
        reproduced,
        check=False,
    )
    assert result.returncode == 2 and "glove.path" in result.stderr and "Traceback" not in result.stderr
    assert tree_state(reproduced) == before


def test_unknown_key_is_refused_before_anything_is_written(reproduced):
    before = tree_state(reproduced)
    for override in ("+sweep.w3=1", "sweep.w3=1"):
        result = run([PY, "-m", "pipeline.repro", override], reproduced, check=False)
        assert result.returncode == 2 and "w3" in result.stderr and "Traceback" not in result.stderr
    assert tree_state(reproduced) == before


# ---------------------------------------------------------------- output folders hold exactly one run's files


def test_checkout_and_exp_apply_leave_exact_output_folders(ran_checkout, private_mlflow_store):
    """Fewer weight pairs -> fewer figures; going back and forth never leaves the other run's PNGs."""
    checkout = ran_checkout
    run(["git", "add", "-A"], checkout)
    run(["git", "commit", "-qm", "baseline", "--allow-empty"], checkout, **GIT_ID)
    figures = checkout / "reports/figures"
    baseline = sorted(p.name for p in figures.glob("*/*"))
    assert len(baseline) == 32 + model_figures()  # 26 + RoPE's and ALiBi's 4 + the families' 2 (+ MiniLM's probe)

    run(["dvc", "exp", "run", "-n", "fewer", "-S", "sweep.w1=[1]", "-S", "sweep.w2=[1]"], checkout)
    fewer = sorted(p.name for p in figures.glob("*/*"))
    assert len(fewer) == len(baseline) - 2 * 3 and set(fewer) < set(baseline)  # 2 sentences x 3 pairs fewer

    run(["git", "checkout", "--", "."], checkout)
    run(["dvc", "checkout"], checkout)
    assert sorted(p.name for p in figures.glob("*/*")) == baseline
    assert json.loads(run(["dvc", "status", "--json"], checkout).stdout) == {}

    run(["dvc", "exp", "apply", "fewer"], checkout)
    assert sorted(p.name for p in figures.glob("*/*")) == fewer
    assert json.loads(run(["dvc", "status", "--json"], checkout).stdout) == {}
