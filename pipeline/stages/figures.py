"""Stage figures: the sweep's figures, labelled: the notebook's projections, the panels and the ratio sweeps per
sentence and the crossover summary (reports/figures/sweep/), drawn by pipeline.figures.folders; figures.name selects
the set (all, summary, none). The encode, relative and tutorials stages draw their own (reports/figures/encode/,
relative/, tutorials/), so a change of the weights re-draws only these. Then reports/report.html, one self-contained page with the narrative, every figure,
the numbers and the explorer (pipeline.outputs.report): the page shows the figures, so it is rebuilt whenever they are.
Then, as DVC runs it (`run_and_log`), one MLflow run of the result: the config as params, the metrics, every output
the registry declares with `log` (figures, plot data, report) and the inputs (pipeline.outputs.tracking.log_result).

`run` draws and writes the report only: a Hydra job (pipeline.__main__) runs it and logs its own child run.

Reads params: figures, metrics.groups, encoding (for the report's text), and to log the run, the whole config;
files: tokens.json, data/encode/, data/sweep/, metrics.json, reports/sentences.csv, reports/plots/ratio_sweep.csv,
the other stages' figures, reports/relative.json, reports/properties.json, and what the run logs
(pipeline/stages/registry.py).

The run record: reports/mlflow_last_run.json (run id, store URI without password, where each input file is stored:
the next run references the unchanged ones instead of uploading them again; not versioned: it differs per machine)
and the DVC output reports/mlflow_run.json, which holds only what is the same everywhere (whether and where to the
result was logged by experiment name), so that logging a run does not change dvc.lock. The run's start is the
pipeline's, not this stage's (`pipeline_start`), so its duration covers the repro.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable
import logging
import os
from pathlib import Path

from pipeline.base.paths import Layout

if TYPE_CHECKING:
    from pipeline.config.schema import Config

log = logging.getLogger("pipeline")


def run(params: Config, layout: Layout, root: Path, while_drawing: Callable[[], None] | None = None) -> list[str]:
    """The figures, then the report page that shows them; returns the PNG names written. while_drawing: work for
    this process while forked workers draw (see `render`)."""
    from pipeline.figures.folders import draw_figures

    names = draw_figures(params, layout, while_drawing)
    write_report(params, layout)
    return names


def run_and_log(params: Config, layout: Layout, root: Path) -> dict:
    """What DVC runs: `run`, then the MLflow run of the result. mlflow's import and the store's opening are done while
    the forked figure workers draw (docs/benchmarks-measurements.md#process-start-and-exit): forked first, they do not
    load mlflow."""
    import time

    started = time.time()
    tracking = params.tracking
    if not tracking.enabled:
        run(params, layout, root)
        return log_run(params, layout, root, started)
    from pipeline.outputs.tracking import check_reachable, prepare_store

    check_reachable(tracking.uri, root)  # a server gone since pipeline.repro checked it: before drawing
    opened = []

    def open_store() -> None:
        opened.append(prepare_store(tracking.uri, tracking.experiment, root))

    run(params, layout, root, while_drawing=open_store)
    if not opened:  # nothing to draw (figures=none)
        open_store()
    return log_run(params, layout, root, started)


def start_inputs() -> tuple[list[str], list[str]]:
    """This stage's inputs that stages write (pipeline/stages/registry.py), as (DVC-cached, kept in git): a fresh clone has
    none of the cached ones, so their files were written (or checked out) by this repro; the others (metrics, plot
    data) carry the clone's time."""
    from pipeline.stages.registry import BY_NAME, STAGES

    cache = {out.layout: out.cache for stage in STAGES for out in stage.outputs}
    inputs = [name for name in BY_NAME["figures"].inputs if name in cache]
    return [name for name in inputs if cache[name]], [name for name in inputs if not cache[name]]


def pipeline_start(layout: Layout, now: float, not_before: float = 0.0) -> float:
    """When this repro's stages wrote their first output (seconds): the earliest modification time among the
    input files of this stage written after the previous DVC-path run ended (mlflow_last_run.json) and not before
    `not_before` (when the dvc command running this stage started: `dvc_started`). Without a previous run, only the
    DVC-cached inputs count (git's files carry the clone's time), and `not_before` keeps out those a queued
    experiment's copy got from the cache, which carry the times of the run that made them. An output's time is its
    stage's end, so the first stage that ran is counted from its end; `now` (this stage's start) if none is newer."""
    from pipeline.base.files import read_json

    previous = read_json(layout.mlflow_last_run).get("end_time") if layout.mlflow_last_run.exists() else None
    cached, in_git = start_inputs()
    names = cached + (in_git if previous else [])
    since = max(previous / 1000 if previous else 0.0, not_before)
    times = []
    for name in names:
        path = getattr(layout, name)
        for file in path.rglob("*") if path.is_dir() else [path]:
            if file.is_file() and since < file.stat().st_mtime <= now:
                times.append(file.stat().st_mtime)
    return min(times, default=now)


def dvc_started() -> float:
    """When the nearest `dvc` process above this one started (`dvc repro`, `dvc exp run`, a queued experiment's
    `dvc exp exec-run`), in seconds; 0 when the stage does not run under DVC."""
    import psutil

    for parent in psutil.Process().parents():
        try:
            if any(part == "dvc" or part.endswith("/dvc") or "dvc.cli" in part for part in parent.cmdline()):
                return parent.create_time()  # `dvc ...`, `python -m dvc ...`, pipeline.repro's dvc child
        except psutil.Error:
            continue
    return 0.0


def log_run(params: Config, layout: Layout, root: Path, started: float) -> dict:
    """Log the result as one MLflow run (unless tracking is disabled), then write its records."""
    from dataclasses import asdict

    from pipeline.base.files import read_json, write_json
    from pipeline.stages.registry import logged_outputs

    if not params.tracking.enabled:
        record = {"enabled": False}
    else:
        from pipeline.config.params import differences
        from pipeline.outputs.tracking import default_run_name, log_result, runs_page, without_credentials

        # the previous run's record: its unchanged input files are referenced, not uploaded again
        previous = read_json(layout.mlflow_last_run) if layout.mlflow_last_run.exists() else None
        record = {
            "enabled": True,
            **log_result(
                asdict(params),
                layout,
                root,
                artifacts=logged_outputs(),
                # named by what differs from conf/'s defaults (MLflow's runs table shows ~40 characters of it)
                run_name=default_run_name(
                    asdict(params), os.environ.get("DVC_EXP_NAME"), differences(asdict(params), root)
                ),
                extra_tags={"runner": "dvc"},
                start_time=int(pipeline_start(layout, started, dvc_started()) * 1000),
                previous=previous,
            ),
        }
        uri = record["tracking_uri"]
        # the URI as logged is redacted (no password); the link has no user info; a local store has no server
        # (and so no port) yet: the server command prints the link with its port
        browse = (
            runs_page(without_credentials(uri), record["experiment_id"])
            if uri.startswith(("http://", "https://"))
            else "python -m pipeline.server (it prints the link to the runs)"
        )
        log.info("mlflow: run %s in %s; browse: %s", record["run_id"], uri, browse)
    write_json(layout.mlflow_last_run, record)
    write_json(layout.mlflow_run, {"logged": params.tracking.enabled, "experiment": params.tracking.experiment})
    return record


def write_report(params: Config, layout: Layout) -> Path:
    """reports/report.html from the sweep's projections and metrics, the ratio sweeps, the figures and the RoPE and
    ALiBi numbers."""
    import numpy as np

    from pipeline.base.files import read_columns, read_json, write_text
    from pipeline.config.figure_sets import shown_sentences
    from pipeline.figures.folders import sentence_columns
    from pipeline.outputs.report import build_report

    meta = read_json(layout.projections_meta)
    shown = shown_sentences(len(meta["sentences"]), params.figures.max_sentences)
    columns = sentence_columns(read_columns(layout.ratio_sweep_csv), shown)
    with np.load(layout.projections) as arrays:
        page = build_report(
            params,
            read_json(layout.metrics),
            meta,
            arrays,
            columns,
            layout,
            relative=read_json(layout.relative_metrics),
            properties=read_json(layout.properties_metrics),
            # a Hydra job runs no study (it is the same for every job of a sweep: `dvc repro study`)
            study=read_json(layout.study_summary) if layout.study_summary.exists() else None,
        )
    write_text(layout.report_html, page)
    log.info("report: %s (%d kB)", layout.report_html, len(page) // 1024)
    return layout.report_html


if __name__ == "__main__":
    from pipeline.stages._cli import stage_main

    stage_main("figures", run_and_log)
