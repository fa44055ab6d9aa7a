"""Stage figures: the sweep's figures, labelled: the notebook's projections, the panels and the ratio sweeps per
sentence, the crossover summary and the tutorials' masks of the texts (reports/figures/sweep/), drawn by
pipeline.figures.folders; figures.name selects the set (all, summary, none). The encode stage draws its own
(reports/figures/encode/, relative/, tutorials/), so a change of the weights re-draws only these. A figure drawn before
from the same data is copied from the figure cache (pipeline.figures.cache). Then reports/report.html, one self-contained
page with the narrative, every figure, the numbers and the explorer (pipeline.outputs.report): the page shows the
figures, so it is rebuilt whenever they are. Then, as DVC runs it (`run_and_log`), one MLflow run of the result and
its records (pipeline.outputs.run_record).

`run` draws and writes the report only: a Hydra job (pipeline.__main__) runs it and logs its own child run.

Reads params: figures, metrics.groups, encoding (for the report's text), and to log the run, the whole config;
files: tokens.json, data/encode/, data/sweep/, metrics.json, reports/sentences.csv, reports/plots/ratio_sweep.csv,
the other stages' figures, reports/relative.json, reports/properties.json, and what the run logs
(pipeline/stages/registry.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable
import logging
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


def log_run(params: Config, layout: Layout, root: Path, started: float) -> dict:
    """The MLflow run of the result and its records (pipeline.outputs.run_record), given what the registry declares:
    the outputs logged as artifacts, and this stage's inputs that stages write (they date the run's start)."""
    from pipeline.outputs import run_record
    from pipeline.stages.registry import logged_outputs

    return run_record.log_run(params, layout, root, started, artifacts=logged_outputs(), inputs=start_inputs())


def start_inputs() -> tuple[list[str], list[str]]:
    """This stage's inputs that stages write (pipeline/stages/registry.py), as (DVC-cached, kept in git): a fresh
    clone has none of the cached ones, so their files were written (or checked out) by this repro; the others
    (metrics, plot data) carry the clone's time."""
    from pipeline.stages.registry import BY_NAME, STAGES

    cache = {out.layout: out.cache for stage in STAGES for out in stage.outputs}
    inputs = [name for name in BY_NAME["figures"].inputs if name in cache]
    return [name for name in inputs if cache[name]], [name for name in inputs if not cache[name]]


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
