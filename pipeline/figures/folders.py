"""Which figures each stage draws into its folder, and when (the kinds of pipeline.config.figure_sets; each kind's
drawing in its own module of this package).

- The encode stage draws its own where their data is computed (`draw_stage_figures`): the encoding's (kind
  `encoding`, pipeline.figures.encoding, reports/figures/encode/), RoPE's and ALiBi's (kind `relative`,
  pipeline.figures.relative) and the families' (kind `properties`, pipeline.figures.families; both
  reports/figures/relative/), and the tutorials' examples (kind `tutorials`, pipeline.figures.tutorials,
  reports/figures/tutorials/). A weight or a texts change redraws none of them. The figure workers are forked before
  the stage imports torch, and each kind's figures are queued as soon as its data is written: the workers draw while
  the stage's process computes the next kind (`StageFigures`).
- The figures stage draws the sweep's (`draw_figures`, reports/figures/sweep/): per shown sentence the notebook's
  projections and the panels (pipeline.figures.projections) and the metrics against r
  (pipeline.figures.ratio_sweep), the crossover summary of every sentence, and the tutorials' masks of the texts.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from pipeline.base.paths import Layout

if TYPE_CHECKING:
    from pipeline.config.schema import Config

log = logging.getLogger("pipeline")
T = TypeVar("T")

# the kinds of pipeline.config.figure_sets the encode stage draws, and the folder of each (a Layout attribute)
FOLDERS = {
    "encoding": "encode_figures_dir",
    "relative": "relative_figures_dir",
    "properties": "relative_figures_dir",
    "tutorials": "tutorial_figures_dir",
}


class StageFigures:
    """Queues the configured set's figures of one kind at a time (`queue(kind)`: nothing when the set does not
    draw that kind) on `batch`, a pipeline.figures.batch.Batch of drawing workers; `outs`: the folder being built
    for each Layout attribute of FOLDERS."""

    def __init__(self, params, layout: Layout, outs: dict[str, Path]) -> None:
        from pipeline.config.figure_sets import drawn_kinds

        self.params, self.layout, self.outs, self.batch = params, layout, outs, None
        self.kinds = drawn_kinds(params.figures.name) & set(FOLDERS)

    def queue(self, kind: str) -> None:
        if kind not in self.kinds:
            return
        cfg, layout, out = self.params.figures, self.layout, self.outs[FOLDERS[kind]]
        path = out.joinpath
        if kind == "tutorials":
            from pipeline.figures.tutorials import queue_tutorial_figures

            queue_tutorial_figures(self.params, path, self.batch)
        elif kind == "encoding":
            from pipeline.figures.encoding import queue_encoding_figures

            queue_encoding_figures(self.params, layout, path, self.batch)
        else:
            if kind == "relative":
                from pipeline.figures.relative import queue_relative_figures as queue
            else:
                from pipeline.figures.families import queue_property_figures as queue
            queue(layout, cfg, path, self.batch)


@contextmanager
def torch_threads(figures: StageFigures) -> Iterator[None]:
    """One torch intra-op thread while forked figure workers draw (they take the other cores, so torch's threads
    would only wait for them: docs/benchmarks.md#the-pipeline); torch's own count again after (a Hydra job's next
    stages run in this process). Imports torch."""
    import torch

    threads = torch.get_num_threads()
    if figures.batch is not None and figures.batch.forked:
        torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def draw_stage_figures(params, layout: Layout, compute: Callable[[StageFigures], T]) -> T:
    """For the encode stage: fork the figure workers (figures.workers), run compute(figures) (which queues each kind's
    figures as it writes their data), wait for every figure, and swap the new folders in for the stage's figure
    folders (no figure of an older config lingers). Returns what compute returns. Call it before importing torch: the
    workers are forked from this process as it is then (numpy and matplotlib)."""
    from pipeline.base.files import replace_dirs

    result = []

    def build(outs: dict[str, Path]) -> None:
        figures = StageFigures(params, layout, outs)
        if not figures.kinds:  # figures=summary or none: no matplotlib, no workers
            result.append(compute(figures))
            return
        from pipeline.figures.batch import Batch

        figures.batch = Batch(cache=layout.figure_cache)
        with figures.batch.drawing(params.figures.workers, "encode: figures"):
            result.append(compute(figures))
        finished(figures.batch, layout, ", ".join(str(p) for p in folders.values()))

    folders = {name: getattr(layout, name) for name in dict.fromkeys(FOLDERS.values())}
    replace_dirs(folders, build)
    return result[0]


def draw_figures(params: Config, layout: Layout, while_drawing: Callable[[], None] | None = None) -> list[str]:
    """Render into a fresh folder swapped in at the end, so that no figure of an older config lingers."""
    from pipeline.base.files import replace_dir

    names: list[str] = []
    replace_dir(layout.sweep_figures_dir, lambda tmp: names.extend(render(params, layout, tmp, while_drawing)))
    return names


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
    from pipeline.figures.batch import Batch
    from pipeline.figures.projections import render_projections
    from pipeline.figures.ratio_sweep import render_summary

    written: list[str] = []
    batch = Batch(cache=layout.figure_cache)

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
    if "tutorials" in kinds:
        from pipeline.figures.tutorials import queue_mask_figures

        queue_mask_figures(params, read_json(layout.tokens), path, batch)
    if while_drawing is None:  # a Hydra job
        results = batch.run(cfg.workers)
    else:  # DVC's run: forked workers draw while this process does `while_drawing`
        with batch.drawing(cfg.workers) as results:
            while_drawing()
    for names in results:
        written += names or []
    finished(batch, layout, str(layout.sweep_figures_dir))
    return written


def finished(batch, layout: Layout, where: str) -> None:
    """Log the figure jobs drawn and those copied from the figure cache; prune this checkout's cache."""
    from pipeline.figures import cache

    copied = f", {len(batch.jobs) - batch.drawn} copied from the figure cache" if batch.cache is not None else ""
    log.info("figures: %d drawn%s, in %s", batch.drawn, copied, where)
    if batch.cache is not None and layout.shared is None:
        cache.prune(batch.cache)


def render_comparisons(params: Config, layout: Layout, meta: dict, shown: int, kinds: set[str], path, batch) -> None:
    """For each of the first `shown` sentences: every weight pair side by side on a shared PCA basis (kind panels),
    and the metrics against r (kind ratio_sweep)."""
    import numpy as np
    from threadpoolctl import threadpool_limits

    from pipeline.base.files import read_columns, read_json
    from pipeline.figures.drawing import short_text
    from pipeline.config.figure_sets import PAIRS_MARKED
    from pipeline.figures.projections import projection_panels, shared_projection
    from pipeline.figures.ratio_sweep import RATIO_CURVES, ratio_curves, ratio_marks

    cfg, d = params.figures, meta["d_model"]
    embeddings = np.load(layout.embedding_matrix).astype(np.float64)
    pe = np.load(layout.pe_matrix, mmap_mode="r")
    tokens = read_json(layout.tokens)
    metrics = read_json(layout.metrics)
    ratio_sweeps = sentence_columns(read_columns(layout.ratio_sweep_csv), shown)
    marks = ratio_marks(meta["pairs"] if cfg.name in PAIRS_MARKED else [], d)
    for s, sentence in enumerate(meta["sentences"][:shown]):
        quoted = short_text(sentence["words"])
        if "panels" in kinds:
            e = embeddings[tokens["ids"][s]]
            p = np.asarray(pe[sentence["positions"]], dtype=np.float64)
            # a (pairs x words, d) SVD: waking BLAS threads costs more than it takes
            # (docs/benchmarks-measurements.md#process-start-and-exit)
            with threadpool_limits(1, user_api="blas"):
                panels = shared_projection([pair["w1"] * e + pair["w2"] * p for pair in meta["pairs"]])
            titles = ["embeddings only" if pair["baseline"] else pair["title"] for pair in meta["pairs"]]
            batch.add(
                projection_panels,
                panels,
                titles,
                sentence["words"],
                sentence["positions"],
                params.metrics.groups,
                path(f"panels_s{s}.png"),
                arrows=cfg.arrows,
                dpi=cfg.dpi,
                title=f"Sentence {s}, d={d}: W1 * embedding + W2 * PE on one shared PCA basis\n{quoted}",
            )
        if "ratio_sweep" in kinds:
            column = ratio_sweeps[s]
            curves = {label: column[name] for label, name in RATIO_CURVES.items()}
            batch.add(
                ratio_curves,
                column["r"],
                curves,
                path(f"ratio_sweep_s{s}.png"),
                r_star=metrics["crossover"][f"s{s}"]["r_star"],
                marks=marks,
                dpi=cfg.dpi,
                title=f"Sentence {s}, d={d}: when does position overtake meaning?\n{quoted}",
            )
