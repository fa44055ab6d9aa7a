"""Stage figures: the sweep's figures, labelled: the notebook's projections, the panels and the ratio sweeps per
sentence and the crossover summary (reports/figures/sweep/), drawn by pipeline.outputs.figures; figures.name selects
the set (all, summary, none). The encode stage draws the encoding's figures (reports/figures/encode/), so a change of
the weights re-draws only these. Then reports/report.html, one self-contained page with the narrative, every figure,
the numbers and the explorer (pipeline.outputs.report): the page shows the figures, so it is rebuilt whenever they are.
Then, as DVC runs it (`run_and_log`), one MLflow run of the result: the config as params, the metrics, every output
the registry declares with `log` (figures, plot data, report) and the inputs (pipeline.outputs.tracking.log_result).

`run` draws and writes the report only: a Hydra job (pipeline.__main__) runs it and logs its own child run.

Reads params: figures, metrics.groups, encoding (for the report's text), and to log the run, the whole config;
files: tokens.json, data/encode/, data/sweep/, metrics.json, reports/sentences.csv, reports/plots/ratio_sweep.csv,
the encode stage's figures, reports/relative.json, and what the run logs (pipeline/registry.py).

The run record: reports/mlflow_last_run.json (run id, store URI without password, where each input file is stored:
the next run references the unchanged ones instead of uploading them again; not versioned: it differs per machine)
and the DVC output reports/mlflow_run.json, which holds only what is the same everywhere (whether and where to the
result was logged by experiment name), so that logging a run does not change dvc.lock. The run's start is the
pipeline's, not this stage's (`pipeline_start`), so its duration covers the repro.
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
    names = draw_figures(params, layout, while_drawing)
    write_report(params, layout)
    return names


def run_and_log(params: Config, layout: Layout, root: Path) -> dict:
    """What DVC runs: `run`, then the MLflow run of the result. mlflow's import and the store's opening (about
    1.2 s of CPU) are done while the forked figure workers draw: forked first, they do not load mlflow."""
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
    """This stage's inputs that stages write (pipeline/registry.py), as (DVC-cached, kept in git): a fresh clone has
    none of the cached ones, so their files were written (or checked out) by this repro; the others (metrics, plot
    data) carry the clone's time."""
    from pipeline.registry import BY_NAME, STAGES

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
    from pipeline.registry import logged_outputs

    if not params.tracking.enabled:
        record = {"enabled": False}
    else:
        from pipeline.outputs.tracking import log_result, runs_page, without_credentials

        # the previous run's record: its unchanged input files are referenced, not uploaded again
        previous = read_json(layout.mlflow_last_run) if layout.mlflow_last_run.exists() else None
        record = {
            "enabled": True,
            **log_result(
                asdict(params),
                layout,
                root,
                artifacts=logged_outputs(),
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


def draw_figures(params: Config, layout: Layout, while_drawing: Callable[[], None] | None = None) -> list[str]:
    """Render into a fresh folder swapped in at the end, so that no figure of an older config lingers."""
    from pipeline.base.files import replace_dir

    names: list[str] = []
    replace_dir(layout.sweep_figures_dir, lambda tmp: names.extend(render(params, layout, tmp, while_drawing)))
    log.info("figures: %d PNG files in %s", len(names), layout.sweep_figures_dir)
    return names


def write_report(params: Config, layout: Layout) -> Path:
    """reports/report.html from the sweep's projections and metrics, the ratio sweeps, the figures and the RoPE and
    ALiBi numbers."""
    import numpy as np

    from pipeline.base.files import read_columns, read_json, write_text
    from pipeline.config.figure_sets import shown_sentences
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
        )
    write_text(layout.report_html, page)
    log.info("report: %s (%d kB)", layout.report_html, len(page) // 1024)
    return layout.report_html


def sentence_columns(table: dict, count: int) -> list[dict]:
    """reports/plots/ratio_sweep.csv (long format, read_columns) -> per sentence 0..count-1 its columns."""
    return [{name: values[table["sentence"] == s] for name, values in table.items()} for s in range(count)]


def render(params: Config, layout: Layout, out: Path, while_drawing: Callable[[], None] | None = None) -> list[str]:
    """Queue a job per figure of the configured set (figures.name; kinds: pipeline.config.figure_sets.FIGURE_SETS),
    the longest first, then draw them (figures.workers processes). while_drawing: run in this process once the
    workers are forked, while they draw (`Batch.drawing`); not run when there is nothing to draw. Returns the PNG
    names written."""
    from pipeline.base.files import read_json
    from pipeline.config.figure_sets import drawn_kinds, shown_sentences

    cfg = params.figures
    kinds = drawn_kinds(cfg.name)
    if not kinds:  # figures=none
        return []
    from pipeline.outputs import figures as fig

    written: list[str] = []
    batch = fig.Batch(out, cache=layout.figure_cache)

    def path(name: str) -> Path:
        written.append(name)
        return out / name

    meta = read_json(layout.projections_meta)
    shown = shown_sentences(len(meta["sentences"]), cfg.max_sentences)
    if kinds & {"panels", "ratio_sweep"}:
        render_comparisons(params, layout, meta, shown, kinds, path, batch)
    if "projection" in kinds:
        render_projections(params, meta, shown, layout, path, batch)
    if "crossover" in kinds and shown < len(meta["sentences"]):
        render_summary(layout, meta, shown, path, batch, cfg.dpi)
    if while_drawing is None:  # a Hydra job: figures a sweep's earlier job drew are linked (batch.cache)
        results = batch.run(cfg.workers)
    else:  # DVC's run (no figure cache): forked workers draw while this process does `while_drawing`
        with batch.drawing(cfg.workers) as results:
            while_drawing()
    for names in results:
        written += names or []
    return written


def render_projections(params: Config, meta: dict, shown: int, layout: Layout, path, batch) -> None:
    """The notebook's figures: one PCA projection per weight pair for each of the first `shown` sentences."""
    import numpy as np

    from pipeline.outputs import figures as fig

    d = meta["d_model"]
    with np.load(layout.projections) as arrays:
        for s, sentence in enumerate(meta["sentences"][:shown]):
            coords, ratio = arrays[f"s{s}_coords"], arrays[f"s{s}_explained_variance_ratio"]
            for j, pair in enumerate(meta["pairs"]):
                what = (
                    "Word embeddings only (W1=1, W2=0)"
                    if pair["baseline"]
                    else f"{pair['title']}: W1 * embedding + W2 * PE"
                )
                title = f"{what}, sentence {s + 1}, d={d}, PCA to 2-D\n" + fig.short_text(sentence["words"])
                batch.add(
                    fig.projection,
                    coords[j],
                    sentence["words"],
                    sentence["positions"],
                    path(f"projection_s{s}_{pair['label']}.png"),
                    title=title,
                    explained=ratio[j],
                    dpi=params.figures.dpi,
                    cmap=params.figures.sequential_cmap,
                )


def render_comparisons(params: Config, layout: Layout, meta: dict, shown: int, kinds: set[str], path, batch) -> None:
    """For each of the first `shown` sentences: every weight pair side by side on a shared PCA basis (kind panels),
    and the metrics against r (kind ratio_sweep)."""
    import numpy as np
    from threadpoolctl import threadpool_limits

    from pipeline.base.files import read_columns, read_json
    from pipeline.outputs import figures as fig
    from pipeline.config.figure_sets import PAIRS_MARKED

    cfg, d = params.figures, meta["d_model"]
    embeddings = np.load(layout.embedding_matrix).astype(np.float64)
    pe = np.load(layout.pe_matrix, mmap_mode="r")
    tokens = read_json(layout.tokens)
    metrics = read_json(layout.metrics)
    ratio_sweeps = sentence_columns(read_columns(layout.ratio_sweep_csv), shown)
    marks = fig.ratio_marks(meta["pairs"] if cfg.name in PAIRS_MARKED else [], d)
    for s, sentence in enumerate(meta["sentences"][:shown]):
        quoted = fig.short_text(sentence["words"])
        if "panels" in kinds:
            e = embeddings[tokens["ids"][s]]
            p = np.asarray(pe[sentence["positions"]], dtype=np.float64)
            # a (pairs x words, d) SVD: waking BLAS threads costs far more than it takes (0.1-0.2 s on 2 busy cores)
            with threadpool_limits(1, user_api="blas"):
                panels = fig.shared_projection([pair["w1"] * e + pair["w2"] * p for pair in meta["pairs"]])
            titles = ["embeddings only" if pair["baseline"] else pair["title"] for pair in meta["pairs"]]
            batch.add(
                fig.projection_panels,
                panels,
                titles,
                sentence["words"],
                sentence["positions"],
                params.metrics.groups,
                path(f"panels_s{s}.png"),
                arrows=cfg.arrows,
                dpi=cfg.dpi,
                title=f"Sentence {s + 1}, d={d}: W1 * embedding + W2 * PE on one shared PCA basis\n{quoted}",
            )
        if "ratio_sweep" in kinds:
            column = ratio_sweeps[s]
            curves = {label: column[name] for label, name in fig.RATIO_CURVES.items()}
            batch.add(
                fig.ratio_curves,
                column["r"],
                curves,
                path(f"ratio_sweep_s{s}.png"),
                r_star=metrics["crossover"][f"s{s}"]["r_star"],
                marks=marks,
                dpi=cfg.dpi,
                title=f"Sentence {s + 1}, d={d}: when does position overtake meaning?\n{quoted}",
            )


def render_summary(layout: Layout, meta: dict, shown: int, path, batch, dpi: int) -> None:
    """More sentences than figures.max_sentences: the crossover r* of every sentence in one histogram."""
    import math

    from pipeline.base.files import read_columns
    from pipeline.outputs import figures as fig

    r_star = [None if math.isnan(r) else float(r) for r in read_columns(layout.sentence_metrics, ["r_star"])["r_star"]]
    batch.add(fig.crossover_summary, r_star, path("crossover_all_sentences.png"), shown=shown, dpi=dpi)


if __name__ == "__main__":
    from pipeline.stages._cli import stage_main

    stage_main("figures", run_and_log)
