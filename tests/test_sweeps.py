"""Sweeps beyond one process: Hydra launchers (basic, joblib, submitit), failure handling, parallel
writers on one SQLite store, and DVC experiment queues. Real Hydra, real MLflow stores, real DVC."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO, run

PY = sys.executable
FAST = ["figures.dpi=40", "hydra.sweep.dir=multirun_test"]  # smaller figures: the tests count them, not pixels


def job(sweep_override: str) -> str:
    """A job's overrides as its run is named: the swept value, then the fixed override of FAST."""
    return f"{sweep_override} figures.dpi=40"


GIT_ID = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@l", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@l"}


def runs_by_kind(uri: str):
    """(client, parent runs, child runs) of the experiment in the store at `uri`."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    exp = client.get_experiment_by_name("positional-encoding")
    assert exp is not None, f"no experiment in {uri}"
    runs = client.search_runs([exp.experiment_id], max_results=1000)
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    return client, parents, children


def artifact_files(client, run_id: str, path: str | None = None) -> list[str]:
    """Every artifact file of a run, recursively."""
    files = []
    for info in client.list_artifacts(run_id, path):
        files.extend(artifact_files(client, run_id, info.path) if info.is_dir else [info.path])
    return sorted(files)


def numeric_leaves(tree) -> int:
    if isinstance(tree, dict):
        return sum(numeric_leaves(v) for v in tree.values())
    return int(isinstance(tree, (int, float)) and not isinstance(tree, bool))


# ---------------------------------------------------------------- summary and launcher configs (fast)


def record(num, status, metrics=None, error=None, overrides=None):
    """A job_result.json as a job writes it: its overrides, and the headline (reports/headline.json) when finished."""
    return {
        "num": num,
        "overrides": overrides or [f"sweep.w2={num}", "figures=summary"],
        "dir": f"/sweep/{num}",
        "status": status,
        "metrics": metrics or {},
        **({"error": error} if error else {}),
    }


def test_summary_is_a_per_job_table_of_what_varies(tmp_path):
    """Columns: the overrides and headline metrics that differ between the finished jobs; the metrics equal in
    every job said once; failed jobs and why; the table as a CSV."""
    import csv

    from pipeline.outputs.multirun import summarize, summary_lines, write_table

    headline = {"r_star.s0": 1.3, "pe_norm_dev_1e-9": 48.37, "oov_count": 0}
    summary = summarize(
        [
            record(0, "finished", {**headline, "r_star.s0": 1.3}),
            record(1, "failed", error="config key sweep.w2 = 'abc' is invalid"),
            record(2, "finished", {**headline, "r_star.s0": 2.5}),
            record(3, "running"),  # the process died before it could say
        ]
    )
    assert (summary["jobs"], summary["finished"]) == (4, 2)
    assert [(f["job"], f["error"][:10]) for f in summary["failed"]] == [(1, "config key"), (3, "the job en")]
    assert "/sweep/3" in summary["failed"][1]["error"]
    assert summary["keys"] == ["sweep.w2"] and summary["varying"] == ["r_star.s0"]
    assert summary["columns"] == ["job", "sweep.w2", "r_star.s0", "pe_norm_dev_1e-9", "oov_count"]
    assert summary["rows"] == [
        {"job": 0, "sweep.w2": "0", "r_star.s0": 1.3, "pe_norm_dev_1e-9": 48.37, "oov_count": 0},
        {"job": 2, "sweep.w2": "2", "r_star.s0": 2.5, "pe_norm_dev_1e-9": 48.37, "oov_count": 0},
    ]
    assert summary["same"] == {"pe_norm_dev_1e-9": 48.37, "oov_count": 0}
    lines = summary_lines(summary)
    assert lines[:3] == [
        "sweep: 4 jobs, 2 finished, 2 failed",
        "  FAILED #1 sweep.w2=1 figures=summary: config key sweep.w2 = 'abc' is invalid",
        f"  FAILED #3 sweep.w2=3 figures=summary: {summary['failed'][1]['error']}",
    ]
    assert lines[3:] == [
        "  job  sweep.w2  r_star.s0",
        "    0         0        1.3",
        "    2         2        2.5",
        "  same in every job: pe_norm_dev_1e-9 48.37, oov_count 0",
    ]
    write_table(tmp_path / "t.csv", summary)
    assert list(csv.reader((tmp_path / "t.csv").open())) == [  # the CSV: every headline metric of every job
        ["job", "sweep.w2", "r_star.s0", "pe_norm_dev_1e-9", "oov_count"],
        ["0", "0", "1.3", "48.37", "0"],
        ["2", "2", "2.5", "48.37", "0"],
    ]


def test_many_jobs_print_a_capped_narrow_table_and_keep_every_row():
    """500 jobs over 2 keys with 40 varying metrics: every row in the summary, the printed lines under 200
    characters, the first rows shown and a line saying where the rest (rows and columns) is."""
    from pipeline.outputs.multirun import SHOWN_ROWS, summarize, summary_lines

    jobs = [
        record(
            n,
            "finished",
            {**{f"r_star.s{s}": n + s / 7 for s in range(40)}, "oov_count": 0},
            overrides=[f"sweep.w2={n}", f"texts.file=texts_{n % 3}.txt"],
        )
        for n in range(500)
    ]
    summary = summarize(jobs)
    assert len(summary["rows"]) == 500 and len(summary["varying"]) == 40 and summary["same"] == {"oov_count": 0}
    assert len(summary["columns"]) == 1 + 2 + 41
    lines = summary_lines(summary, "/sweep/sweep_summary.csv")
    assert max(map(len, lines)) < 200
    assert lines[1].split()[:4] == ["job", "sweep.w2", "texts.file", "r_star.s0"]
    assert len(lines) == 1 + 1 + SHOWN_ROWS + 1 + 1
    assert lines[-2].startswith("  (480 more jobs and ") and "more columns in /sweep/sweep_summary.csv)" in lines[-2]


def test_a_job_reports_its_headline_and_the_families_property_numbers(tmp_path):
    """job_metrics: headline.json as it is (with r* over the sentences), and every numeric property value of properties.json by family and
    property (null cells, by-construction flags and the other numbers of the table left out)."""
    from pipeline.base.paths import Layout
    from pipeline.outputs.multirun import job_metrics

    layout = Layout(tmp_path)
    layout.headline_metrics.parent.mkdir(parents=True)
    layout.headline_metrics.write_text(json.dumps({"r_star.s0": 1.3, "oov_count": 0}))
    properties = {
        "positions": 64,
        "families": {
            "nope": {"label": "NoPE", "d": None, "wang_symmetry": {"value": None, "reason": "P is constant"}},
            "rope_ntk": {
                "d": 128,
                "chen_locality": {"value": 0.38},
                "chen_symmetry": {"value": 1.0, "by_construction": True},
            },
        },
    }
    layout.properties_metrics.write_text(json.dumps(properties))
    assert job_metrics(tmp_path) == {
        "r_star.median": 1.3,  # the median over the sentences, which headline.json gives only beyond the listed ones
        "r_star.s0": 1.3,
        "oov_count": 0,
        "properties.rope_ntk.chen_locality": 0.38,
        "properties.rope_ntk.chen_symmetry": 1.0,
    }


def test_property_numbers_are_columns_only_where_they_vary():
    """A sweep over relative.*: the property numbers it moves are columns; those it does not are counted once in
    the printed summary (not listed: dozens of them), and stay out of the CSV."""
    from pipeline.outputs.multirun import summarize, summary_lines

    def metrics(base):
        return {
            "r_star.s0": 1.3,
            "properties.rope_ntk.chen_locality": base / 1e5,
            "properties.nope.chen_locality": 0.05,
        }

    jobs = [
        record(n, "finished", metrics(base), overrides=[f"relative.rope.base={base}"])
        for n, base in enumerate((1e4, 5e5))
    ]
    summary = summarize(jobs)
    assert summary["columns"] == ["job", "relative.rope.base", "r_star.s0", "properties.rope_ntk.chen_locality"]
    assert summary["varying"] == ["properties.rope_ntk.chen_locality"]
    same = [line for line in summary_lines(summary) if "same in every job" in line]
    assert same == ["  same in every job: r_star.s0 1.3, and the families table's 1 property numbers"]


def test_a_multirun_draws_the_summary_figure_set_unless_the_command_line_chooses():
    from pipeline.outputs.multirun import figure_set_of_job

    assert figure_set_of_job("all", ["sweep.w2=1", "figures.dpi=40"]) == "summary"
    assert figure_set_of_job("all", ["sweep.w2=1", "figures=all"]) is None  # asked for: every figure
    assert figure_set_of_job("all", ["figures.name=all"]) is None
    assert figure_set_of_job("none", ["sweep.w2=1"]) is None  # conf/ chose another default
    assert figure_set_of_job("all", ["figures=none"]) is None


def summary_of(rows: list[tuple[dict, dict]]) -> dict:
    """The summary of finished jobs given as (overrides as {key: value}, metrics)."""
    from pipeline.outputs.multirun import summarize

    return summarize(
        [
            record(n, "finished", metrics, overrides=[f"{k}={v}" for k, v in overrides.items()])
            for n, (overrides, metrics) in enumerate(rows)
        ]
    )


def drawn_figure(summary: dict, tmp_path: Path, monkeypatch) -> tuple[Path | None, dict, list]:
    """sweep_summary.draw on `summary`: (its path or None, what test_figures_bounds.inspect finds, its axes)."""
    from test_figures_bounds import inspect

    from pipeline.figures import drawing as fig
    from pipeline.figures.sweep_summary import draw

    seen = {}

    def keep(figure, path):
        seen["found"], seen["axes"] = inspect(figure), list(figure.axes)

    monkeypatch.setattr(fig, "SAVED", [keep])
    path = draw(summary, tmp_path / "sweep_summary.png", dpi=40)
    return path, seen.get("found", {}), seen.get("axes", [])


def test_the_sweep_figure_draws_r_star_against_each_numeric_key_one_line_per_category(tmp_path, monkeypatch):
    """encoding.base x texts: r* against the base on a log axis (its values span a factor of 100), one line per
    texts option; the second sentence's r* (one texts option only) in a panel of its own; nothing outside the
    figure or its axes."""
    bases, texts = (100, 1000, 10000), ("seed", "queen_king")
    rows = [
        ({"encoding.base": base, "texts": text}, {"r_star.s0": i + j / 10, **({"r_star.s1": 2.0 + i} if j else {})})
        for i, base in enumerate(bases)
        for j, text in enumerate(texts)
    ]
    path, found, axes = drawn_figure(summary_of(rows), tmp_path, monkeypatch)
    assert path is not None and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [ax.get_ylabel() for ax in axes] == ["r* of sentence 0", "r* of sentence 1"]
    assert {ax.get_xlabel() for ax in axes} == {"encoding.base (log scale)"}
    first = axes[0].get_lines()
    assert sorted(line.get_label() for line in first) == ["texts=queen_king", "texts=seed"]
    seed = next(line for line in first if line.get_label() == "texts=seed")
    assert list(seed.get_xdata()) == [2.0, 3.0, 4.0] and list(seed.get_ydata()) == [0.0, 1.0, 2.0]  # log10 of the base
    assert [line.get_label() for line in axes[1].get_lines()] == ["texts=queen_king"]  # only its jobs have an s1
    assert not found["outside_figure"] and not found["outside_axes"], found


def test_a_categorical_sweep_gets_a_point_chart_and_an_unmoved_r_star_is_drawn_flat(tmp_path, monkeypatch):
    """encoding x layout (no numeric key): points at each encoding, one series per layout; a sweep.w2 sweep, where no
    headline number moves, still shows r* (flat) against w2; no swept key: no figure."""
    rows = [
        ({"encoding": enc, "encoding.layout": lay}, {"r_star.s0": 1.0 + i + j / 10})
        for i, enc in enumerate(("sinusoidal", "learned"))
        for j, lay in enumerate(("interleaved", "concatenated"))
    ]
    path, found, axes = drawn_figure(summary_of(rows), tmp_path, monkeypatch)
    assert path is not None and len(axes) == 1
    assert [t.get_text() for t in axes[0].get_xticklabels()] == ["sinusoidal", "learned"]
    assert {line.get_linestyle() for line in axes[0].get_lines()} == {"None"}  # points, not lines
    assert sorted(line.get_label() for line in axes[0].get_lines()) == [
        "encoding.layout=concatenated",
        "encoding.layout=interleaved",
    ]
    assert not found["outside_figure"] and not found["outside_axes"], found

    flat = summary_of([({"sweep.w2": w2}, {"r_star.s0": 1.3, "oov_count": 0}) for w2 in (1, 2, 4)])
    path, _, axes = drawn_figure(flat, tmp_path, monkeypatch)
    assert [ax.get_ylabel() for ax in axes] == ["r* of sentence 0"]
    assert list(axes[0].get_lines()[0].get_ydata()) == [1.3, 1.3, 1.3]
    assert drawn_figure(summary_of([({}, {"r_star.s0": 1.3})]), tmp_path, monkeypatch)[0] is None


def test_each_job_s_log_lines_carry_its_number():
    """Inside a job every line of every handler starts with `[job N] ` (each line of a traceback too); after it the
    handlers format as before (the launcher's lines between jobs and the summary carry no job number)."""
    import io
    import logging

    from pipeline.__main__ import tagged_job_logs

    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("[%(name)s] %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        with tagged_job_logs(3):
            logging.getLogger("pipeline.test").warning("first\nsecond")
        logging.getLogger("pipeline.test").warning("between jobs")
    finally:
        root.removeHandler(handler)
    assert stream.getvalue().splitlines() == [
        "[job 3] [pipeline.test] first",
        "[job 3] second",
        "[pipeline.test] between jobs",
    ]


@pytest.mark.parametrize(
    "launcher, target, expect",
    [
        ("parallel", "joblib_launcher.JoblibLauncher", {"n_jobs": 2}),
        ("submitit_local", "submitit_launcher.LocalLauncher", {"timeout_min": 60}),
        (
            "slurm",
            "pe_pipeline_slurm.SlurmLauncher",
            {"partition": "cpu", "cpus_per_task": 2, "mem_gb": 8, "setup": ["source .venv/bin/activate"]},
        ),
    ],
)
def test_launcher_configs_compose(launcher, target, expect):
    """The documented launcher choices resolve to the installed plugins (the SLURM one cannot run here)."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    overrides = [f"hydra/launcher={launcher}"] + (["hydra.launcher.partition=cpu"] if launcher == "slurm" else [])
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        cfg = compose("config", overrides=overrides, return_hydra_config=True)
    conf = OmegaConf.to_container(cfg.hydra.launcher, resolve=False)
    assert conf["_target_"].endswith(target)
    assert {k: conf[k] for k in expect} == expect
    assert cfg.hydra.callbacks.mlflow_parent._target_ == "pipeline.outputs.parent_run.MultirunParentRun"
    assert cfg.hydra.sweeper._target_ == "hydra_plugins.pe_pipeline_sweeper.ComposedOnceSweeper"


def test_the_basic_launcher_runs_each_job_on_the_config_the_sweeper_s_check_composed(tmp_path, monkeypatch):
    """A 3-job multirun with the project's sweeper and the basic launcher composes 4 configs (the sweep's, then one per
    job), not 7 (the check's and the launcher's each), and each job's config is the one Hydra composes for it alone."""
    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    from hydra._internal.hydra import Hydra
    from hydra._internal.utils import create_config_search_path
    from hydra.core.global_hydra import GlobalHydra
    from hydra.types import RunMode
    from omegaconf import OmegaConf, open_dict

    composed, seen = [], []
    compose = ConfigLoaderImpl.load_configuration
    monkeypatch.setattr(ConfigLoaderImpl, "load_configuration", lambda *a, **k: composed.append(1) or compose(*a, **k))
    hydra = Hydra.create_main_hydra2("pipeline", create_config_search_path(str(REPO / "conf")))
    try:
        sweep = [
            "sweep.w2=[1],[2],[3]",
            "figures=none",
            f"hydra.sweep.dir={tmp_path}",
            "~hydra.callbacks.mlflow_parent",
        ]
        hydra.multirun("config", lambda cfg: seen.append(OmegaConf.to_yaml(cfg)), overrides=sweep)
        assert len(composed) == 4 and len(seen) == 3
        master = hydra.config_loader.load_configuration("config", sweep, run_mode=RunMode.MULTIRUN)
        for w2, job in zip("123", seen):
            alone = hydra.config_loader.load_sweep_config(master, [f"sweep.w2=[{w2}]", "figures=none"])
            with open_dict(alone):
                del alone["hydra"]  # Hydra hands a job its config without the hydra node
            assert job == OmegaConf.to_yaml(alone)
    finally:
        GlobalHydra.instance().clear()


def test_parent_run_is_closed_failed_when_a_sweep_breaks_off(tmp_path, private_mlflow_store):
    """The callback in-process: a sweep whose end never comes (launcher crash) leaves no RUNNING parent, and a
    sweep whose jobs all vanished ends FAILED with exit status 1."""
    from hydra import compose, initialize_config_dir

    from pipeline.outputs.parent_run import MultirunParentRun

    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        cfg = compose("config", overrides=[f"hydra.sweep.dir={tmp_path / 'sweep'}"], return_hydra_config=True)
    broken, empty = MultirunParentRun(), MultirunParentRun()
    broken.on_multirun_start(config=cfg)
    broken._close_if_open()  # what atexit does when on_multirun_end was never reached
    empty.on_multirun_start(config=cfg)
    with pytest.raises(SystemExit) as stop:
        empty.on_multirun_end(config=cfg)
    assert stop.value.code == 1
    client, parents, _ = runs_by_kind(private_mlflow_store)
    assert [p.info.status for p in parents] == ["FAILED", "FAILED"]
    statuses = {p.data.tags.get("error", "no error tag"): p.data.metrics.get("jobs") for p in parents}
    assert statuses == {"the sweep stopped before its end: see the console output": None, "no error tag": 0.0}


def test_the_parent_run_holds_the_table_the_figure_and_each_job_s_headline(tmp_path, private_mlflow_store):
    """The callback in-process, over two finished job records of an encoding.base sweep: the parent run gets
    sweep_summary.csv/.json/.png as artifacts and each headline metric as a metric history, one point per job at
    step = the job's number."""
    from hydra import compose, initialize_config_dir

    from pipeline.outputs.multirun import read_sweep, write_job
    from pipeline.outputs.parent_run import MultirunParentRun

    sweep_dir = tmp_path / "sweep"
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        cfg = compose("config", overrides=[f"hydra.sweep.dir={sweep_dir}"], return_hydra_config=True)
    callback = MultirunParentRun()
    callback.on_multirun_start(config=cfg)
    sweep_id = read_sweep(sweep_dir)["sweep_id"]
    for num, (base, r_star) in enumerate(((100, 0.73), (10000, 1.30))):
        job = record(num, "finished", {"r_star.s0": r_star, "oov_count": 0}, overrides=[f"encoding.base={base}"])
        write_job(sweep_dir / str(num), {**job, "sweep_id": sweep_id, "dir": str(sweep_dir / str(num))})
    callback.on_multirun_end(config=cfg)
    client, [parent], _ = runs_by_kind(private_mlflow_store)
    assert parent.info.status == "FINISHED"
    assert artifact_files(client, parent.info.run_id) == [
        "sweep_summary.csv",
        "sweep_summary.json",
        "sweep_summary.png",
    ]
    history = client.get_metric_history(parent.info.run_id, "r_star.s0")
    assert sorted((m.step, m.value) for m in history) == [(0, 0.73), (1, 1.30)]
    assert sorted(m.step for m in client.get_metric_history(parent.info.run_id, "oov_count")) == [0, 1]
    assert (sweep_dir / "sweep_summary.png").stat().st_size > 0


def test_project_root_of_a_dvc_temp_copy(tmp_path, monkeypatch):
    """Inside DVC's temp copy of an experiment, shared state (MLflow store, caches) belongs to the owning project."""
    from pipeline.base.paths import checkout_root, project_root

    owner = tmp_path / "project"
    temp_copy = owner / ".dvc" / "tmp" / "exps" / "tmpabc123"
    elsewhere = owner / "build" / "copy"  # a copy DVC might place elsewhere: only $DVC_ROOT names the owner
    for folder in (owner, temp_copy, elsewhere):
        (folder / "conf").mkdir(parents=True)
        (folder / "dvc.yaml").write_text("stages: {}\n")
    monkeypatch.delenv("DVC_ROOT", raising=False)
    monkeypatch.delenv("PE_PROJECT_ROOT", raising=False)
    assert (checkout_root(temp_copy), project_root(temp_copy)) == (temp_copy, owner)
    assert project_root(elsewhere) == elsewhere and project_root(owner) == owner
    monkeypatch.setenv("DVC_ROOT", str(owner))  # what DVC sets for the stages of a queued experiment
    assert project_root(elsewhere) == owner and project_root(owner) == owner
    monkeypatch.setenv("DVC_ROOT", str(tmp_path / "unrelated"))
    assert project_root(elsewhere) == elsewhere


# ---------------------------------------------------------------- concurrency on one fresh SQLite store

WRITER = """
import sys, time
from pathlib import Path
from pipeline.config import compose
from pipeline.base.paths import Layout
from pipeline.outputs.tracking import log_result
from pipeline.stages.registry import logged_outputs
base, start = Layout(Path(sys.argv[1])), Path(sys.argv[2])
params = compose(["sweep.w2=" + sys.argv[3]])
while not start.exists():
    time.sleep(0.01)
print(log_result(params, base, Path(sys.argv[4]), artifacts=logged_outputs(), run_name="writer-" + sys.argv[3])["run_id"])
"""


def fake_result(base: Path, figures: int) -> None:
    """A small pipeline result tree: what log_result reads (metrics, figures, plots)."""
    from pipeline.base.paths import Layout

    layout = Layout(base)
    layout.sweep_figures_dir.mkdir(parents=True)
    layout.plots_dir.mkdir(parents=True)
    metrics = {
        "encoding": {"norm_max_abs_dev": 1e-8, "probe": {"p1": 2.0}},
        "sweep": {f"s{i}": {"d": i / 10} for i in range(20)},
    }
    layout.metrics.write_text(json.dumps(metrics))
    for i in range(figures):
        (layout.sweep_figures_dir / f"figure_{i}.png").write_bytes(os.urandom(2048))
    for csv in (layout.pe_norms_csv, layout.offset_distance_csv, layout.ratio_sweep_csv, layout.sentence_metrics):
        csv.write_text("x,y\n0,1\n1,2\n")


@pytest.mark.slow
def test_four_writers_on_a_fresh_sqlite_store_lose_nothing(tmp_path):
    """4 processes log at the same moment into a store that does not exist yet (what `dvc queue start -j 4`
    on a fresh clone does): without the store lock, MLflow's schema migrations collide and runs are lost."""
    store = f"sqlite:///{tmp_path / 'fresh.db'}"  # not private_mlflow_store, whose tables are made
    base = tmp_path / "result"
    fake_result(base, figures=6)
    start = tmp_path / "go"
    env = dict(os.environ, MLFLOW_TRACKING_URI=store)
    procs = [
        subprocess.Popen(
            [PY, "-c", WRITER, str(base), str(start), str(w2), str(REPO)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w2 in (1, 2, 3, 4)
    ]
    time.sleep(1.0)  # let them import; then release them together
    start.touch()
    outs = [p.communicate(timeout=600) for p in procs]  # guards a hang: each writer takes seconds when quiet
    assert [p.returncode for p in procs] == [0, 0, 0, 0], "\n".join(err[-2000:] for _, err in outs)

    client, runs, _ = runs_by_kind(store)
    assert sorted(r.info.run_name for r in runs) == ["writer-1", "writer-2", "writer-3", "writer-4"]
    assert {r.info.run_id for r in runs} == {out.strip().splitlines()[-1] for out, _ in outs}
    for r in runs:
        assert r.info.status == "FINISHED"
        assert len(r.data.metrics) == 22 and r.data.params["sweep.w2"] == r.info.run_name[-1]
        assert artifact_files(client, r.info.run_id) == sorted(
            [f"figures/figure_{i}.png" for i in range(6)]
            + [
                "metrics.json",
                "plots/offset_distance.csv",
                "plots/pe_norms.csv",
                "plots/ratio_sweep.csv",
                "sentences.csv",
            ]
        )
    # artifacts sit beside the private store, not in the project's mlartifacts/
    assert len(list((tmp_path / "mlartifacts").glob("*/artifacts/figures/*.png"))) == 24


# ---------------------------------------------------------------- Hydra launchers, end to end (slow)


def check_sweep(checkout: Path, sweep_dir: Path, uri: str, finished: list[str], failed: list[str]):
    """Every job in its own dir; one parent run with the summary; a child run per job (FAILED for the failed)."""
    summary = json.loads((sweep_dir / "sweep_summary.json").read_text())
    assert summary["jobs"] == len(finished) + len(failed) and summary["finished"] == len(finished)
    assert sorted(" ".join(f["overrides"]) for f in summary["failed"]) == sorted(failed)
    client, parents, children = runs_by_kind(uri)
    assert len(parents) == 1
    parent = parents[0]
    assert parent.info.status == ("FAILED" if failed else "FINISHED")
    assert parent.data.metrics["jobs"] == summary["jobs"] and parent.data.metrics["jobs_failed"] == len(failed)
    assert parent.data.tags["mlflow.note.content"].startswith(f"sweep: {summary['jobs']} jobs")
    parent_files = artifact_files(client, parent.info.run_id)
    shared = [f for f in parent_files if f.startswith("inputs/")]
    assert [f for f in parent_files if f not in shared] == [
        "sweep_summary.csv",
        "sweep_summary.json",
        "sweep_summary.png",
    ]
    records = [json.loads(p.read_text()) for p in sweep_dir.glob("*/job_result.json")]
    assert [row["job"] for row in summary["rows"]] == sorted(r["num"] for r in records if r["status"] == "finished")
    if finished:  # the inputs every point shares, logged once, on the parent (the points differ in sweep.w2 only)
        assert sorted(f.rsplit("/", 1)[1] for f in shared) == ["encode.json", "manifest.json", "tokens.json"]
        # and computed once: one tokenize and one encode output in the sweep's stage cache
        cached = sorted(e.name.split("-")[0] for e in (sweep_dir / ".stage_cache").iterdir() if e.name[0] != ".")
        assert cached.count("tokenize") == cached.count("encode") == 1 and cached.count("sweep") == len(finished)
    assert {c.data.tags["mlflow.parentRunId"] for c in children} == {parent.info.run_id}
    by_name = {c.info.run_name: c for c in children}
    assert sorted(by_name) == sorted(finished + failed)
    for name in failed:
        assert by_name[name].info.status == "FAILED" and by_name[name].data.tags["error"]
    job_dirs = {}
    for record in (json.loads(p.read_text()) for p in sweep_dir.glob("*/job_result.json")):
        job_dirs[" ".join(record["overrides"])] = Path(record["dir"])
        assert Path(record["dir"]).parent == sweep_dir
    assert len(set(job_dirs.values())) == len(finished) + len(failed)
    for name in finished:
        run = by_name[name]
        out = job_dirs[name]
        assert run.info.status == "FINISHED"
        metrics = json.loads((out / "reports" / "metrics.json").read_text())
        assert len(run.data.metrics) == numeric_leaves(metrics)  # every metric of this job, none of another's
        assert artifact_files(client, run.info.run_id, "inputs") == ["inputs/params.yaml"]
        assert (
            run.data.tags["shared_inputs"] == f"{shared[0].rsplit('/', 1)[0]}/ of the parent run {parent.info.run_id}"
        )
        logged = artifact_files(client, run.info.run_id, "figures")
        assert logged == sorted(f"figures/{p.name}" for p in (out / "reports" / "figures").rglob("*.png"))
        assert len(logged) >= 4  # figures=summary, a multirun's default: the panels and ratio sweeps of 2 sentences
    assert not list((checkout / "reports").glob("mlflow*run.json"))  # the DVC workspace is left alone
    return summary, parent


@pytest.mark.slow
def test_basic_launcher_one_failed_job_keeps_the_others(checkout, private_mlflow_store):
    """The basic launcher runs jobs in this process: a bad value in job #1 must not stop the sweep or lose job #0."""
    out = run([PY, "-m", "pipeline", "-m", "sweep.w2=1,abc", *FAST], checkout, check=False)
    log = out.stdout + out.stderr
    assert out.returncode == 1, log
    assert "#1 : sweep.w2=abc" in log and f"FAILED #1 {job('sweep.w2=abc')}: config key sweep.w2" in log
    summary, parent = check_sweep(
        checkout,
        checkout / "multirun_test",
        private_mlflow_store,
        finished=[job("sweep.w2=1")],
        failed=[job("sweep.w2=abc")],
    )
    assert "'abc'" in summary["failed"][0]["error"] and "sweep.w2=abc" in parent.data.tags["failed_jobs"]


@pytest.mark.slow
def test_joblib_parallel_jobs_share_the_encoding_and_its_figures(checkout, private_mlflow_store):
    """hydra/launcher=parallel with n_jobs=2: two processes write to the same SQLite store at once; with figures=all
    (asked for: a multirun's default is figures=summary) the encode stage's figures are drawn once, by the job that
    computes the encoding while the other waits for it. (Two jobs: the waiting takes one waiter; more writers at
    once into one store are tests/test_concurrency.py's: a 4-job sweep and 4 runs.)"""
    out = run(
        [
            PY,
            "-m",
            "pipeline",
            "-m",
            "hydra/launcher=parallel",
            "hydra.launcher.n_jobs=2",
            "sweep.w2=1,2",
            *FAST,
            "figures=all",
        ],
        checkout,
    )
    log = out.stdout + out.stderr
    assert "Joblib.Parallel(n_jobs=2" in log
    summary, _ = check_sweep(
        checkout,
        checkout / "multirun_test",
        private_mlflow_store,
        finished=[f"{job(f'sweep.w2={w}')} figures=all" for w in (1, 2)],
        failed=[],
    )
    # the table: one row per job, the swept key its one varying column (sweep.w2 moves no headline number)
    assert summary["keys"] == ["sweep.w2"] and summary["varying"] == [] and "r_star.s0" in summary["same"]
    # every job's lines carry its number (two processes write to one console)
    assert all(f"[job {n}] " in log for n in range(2))
    assert log.count("] - encode: PE ") == 1  # computed by one job; the other waited for it
    assert [(row["job"], row["sweep.w2"]) for row in summary["rows"]] == [(0, "1"), (1, "2")]
    # jobs in parallel share the cores: one figure worker each (docs/sweeps.md)
    assert "  workers: 1\n" in (checkout / "multirun_test" / "0" / "params.yaml").read_text()
    # figures drawn from the same data are kept once for the sweep, whichever of the processes drew them first:
    # the encoding's (the weights do not change them) once, each point's panels (they do) once per point
    entries = [entry for entry in (checkout / "multirun_test" / ".stage_cache" / "figures").iterdir()]
    kept = sorted(png.name for entry in entries for png in entry.glob("*.png"))
    assert kept.count("panels_s0.png") == 2 and kept.count("pe_heatmap.png") == 1
    heatmaps = {
        (d / "reports/figures/encode/pe_heatmap.png").read_bytes() for d in (checkout / "multirun_test").glob("[0-9]")
    }
    assert len(heatmaps) == 1 and not [e for e in entries if e.name.startswith(".")]  # no temp entry left


@pytest.mark.slow
def test_submitit_local_launcher_with_a_failed_job(checkout, private_mlflow_store):
    """hydra/launcher=submitit_local (the path submitit_slurm takes, minus sbatch): each job its own process."""
    out = run(
        [PY, "-m", "pipeline", "-m", "hydra/launcher=submitit_local", "sweep.w2=10,abc", *FAST], checkout, check=False
    )
    assert out.returncode == 1, out.stdout + out.stderr
    check_sweep(
        checkout,
        checkout / "multirun_test",
        private_mlflow_store,
        finished=[job("sweep.w2=10")],
        failed=[job("sweep.w2=abc")],
    )
    assert list((checkout / "multirun_test" / ".submitit").glob("*/*_log.out"))  # submitit ran the jobs


# ---------------------------------------------------------------- DVC experiment queue (slow)


def queue_status(checkout: Path) -> str:
    return run(["dvc", "queue", "status"], checkout).stdout


@pytest.mark.slow
def test_dvc_queue_two_points_log_to_the_project_store(ran_checkout, monkeypatch):
    """`dvc exp run --queue -S 'sweep.w2=1,10'` + `dvc queue start -j 2` in a clone that has run once: both run in
    DVC temp copies (.dvc/tmp/exps/), log to the project's own mlflow.db (the default store), and `dvc exp show`
    lists them."""
    checkout = ran_checkout
    monkeypatch.delenv("MLFLOW_TRACKING_URI")  # the default store: <project root>/mlflow.db
    queued = run(["dvc", "exp", "run", "--queue", "-S", "sweep.w2=1,10", "-S", "glove=6B-50d"], checkout, **GIT_ID)
    assert queued.stdout.count("Queued experiment") == 2
    run(["dvc", "queue", "start", "-j", "2"], checkout, **GIT_ID)
    try:
        # guards a hang: two pipeline runs in DVC's temp copies take a few minutes on a quiet 2-core machine, and
        # several times that under load; the loop ends as soon as the queue is done
        deadline = time.monotonic() + 1800
        while any(word in queue_status(checkout) for word in ("Queued", "Running")):
            assert time.monotonic() < deadline, queue_status(checkout)
            time.sleep(2)
    finally:
        run(["dvc", "queue", "stop"], checkout, check=False)
    status = queue_status(checkout)
    names = [line.split()[1] for line in status.splitlines() if line.split()[-1:] in (["Success"], ["Failed"])]
    logs = {name: run(["dvc", "queue", "logs", name], checkout, check=False).stdout[-3000:] for name in names}
    assert status.count("Success") == 2, f"{status}\n{logs}"
    assert all(".dvc/tmp/exps/tmp" in log for log in logs.values())  # they ran in DVC's temp copies

    shown = json.loads(run(["dvc", "exp", "show", "--json"], checkout).stdout)
    exps = {
        rev["name"]: rev["data"] for entry in shown for group in entry.get("experiments") or [] for rev in group["revs"]
    }
    assert sorted(exps) == sorted(names)
    assert sorted(d["params"]["params.yaml"]["data"]["sweep"]["w2"] for d in exps.values()) == [1, 10]
    assert all("r_star" in json.dumps(d["metrics"]["reports/headline.json"]) for d in exps.values())

    store = checkout / "mlflow.db"
    assert list(checkout.rglob("mlflow.db")) == [store]  # no store of its own in a temp copy
    client, runs, _ = runs_by_kind(f"sqlite:///{store}")
    assert sorted(r.data.tags["dvc_exp_name"] for r in runs) == sorted(names)
    assert sorted(r.data.params["sweep.w2"] for r in runs) == ["1", "10"]
    for r in runs:
        assert r.info.status == "FINISHED" and r.info.artifact_uri.startswith((checkout / "mlartifacts").as_uri())
        assert len(artifact_files(client, r.info.run_id, "figures")) > 5
