"""The figures of the encode stage's data, drawn by that stage (reports/figures/encode/): the encoding matrix, its
dot products and distances and the two property plots (kind `encoding`), RoPE's and ALiBi's (kind `relative`,
pipeline.outputs.relative_figures), the families' properties, RoPE's scalings and MiniLM-L6's probe (kind
`properties`, pipeline.outputs.family_figures) and the tutorials' (kind `tutorials`). Drawn where their data is computed, so that a change of the weights (`sweep.*`)
re-draws none of them (the figures stage draws the sweep's).

The figure workers are forked before the stage imports torch, and each kind's figures are queued as soon as its data
is written: the workers draw while this process computes the next kind (`EncodeFigures`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from pipeline.base.paths import Layout

log = logging.getLogger("pipeline")
T = TypeVar("T")

KINDS = frozenset(
    {"encoding", "relative", "properties", "tutorials"}
)  # the kinds of pipeline.config.figure_sets drawn here


class EncodeFigures:
    """Queues the configured set's figures of one kind at a time (`queue(kind)`: nothing when the set does not
    draw that kind) on `batch`, a pipeline.outputs.figures.Batch of drawing workers; `names`: the PNG names queued."""

    def __init__(self, params, layout: Layout, out: Path) -> None:
        from pipeline.config.figure_sets import drawn_kinds

        self.params, self.layout, self.out, self.batch = params, layout, out, None
        self.kinds = drawn_kinds(params.figures.name) & KINDS
        self.names: list[str] = []

    def path(self, name: str) -> Path:
        self.names.append(name)
        return self.out / name

    def queue(self, kind: str) -> None:
        if kind not in self.kinds:
            return
        cfg, layout = self.params.figures, self.layout
        if kind == "tutorials":
            from pipeline.base.files import read_json
            from pipeline.tutorials.figures import queue_tutorial_figures

            tokens = read_json(layout.tokens)
            queue_tutorial_figures(self.params, self.path, self.batch, root=layout.base, tokens=tokens)
        elif kind == "encoding":
            queue_encoding_figures(self.params, layout, self.path, self.batch)
        else:
            if kind == "relative":
                from pipeline.outputs.relative_figures import queue_relative_figures as queue
            else:
                from pipeline.outputs.family_figures import queue_property_figures as queue
            queue(layout, cfg, self.path, self.batch)


def draw_encode_figures(params, layout: Layout, compute: Callable[[EncodeFigures], T]) -> T:
    """Fork the figure workers (figures.workers), run compute(figures) (which queues each kind's figures as it
    writes their data), wait for every figure, and swap the new folder in for reports/figures/encode/ (no figure of
    an older config lingers). Returns what compute returns. Call it before importing torch: the workers are forked
    from this process as it is then (numpy and matplotlib)."""
    from pipeline.base.files import replace_dir

    result = []

    def build(out: Path) -> None:
        figures = EncodeFigures(params, layout, out)
        if not figures.kinds:  # figures=summary or none: no matplotlib, no workers
            result.append(compute(figures))
            return
        from pipeline.outputs.figures import Batch

        figures.batch = Batch(out)
        with figures.batch.drawing(params.figures.workers, "encode: figures"):
            result.append(compute(figures))
        log.info("figures: %d PNG files in %s", len(figures.names), layout.encode_figures_dir)

    replace_dir(layout.encode_figures_dir, build)
    return result[0]


def queue_encoding_figures(params, layout: Layout, path, batch) -> None:
    """The encoding matrix, its dot products and distances, and the two property plots."""
    import numpy as np

    from pipeline.base.files import read_columns, read_json
    from pipeline.outputs import figures as fig

    cfg = params.figures
    dpi, max_size = cfg.dpi, cfg.max_heatmap_size
    colours = {"cmap": cfg.cmap, "sequential": cfg.sequential_cmap}
    encoded = read_json(layout.encode_summary)
    mats = read_json(layout.matrices_info)  # layout; dot/distance.npy hold block x block means
    d, kind = encoded["d_model"], encoded["kind"]
    text = fig.encoding_figure_text(
        kind, mats["layout"], d, fig.encoding_tag(kind, d, encoded["max_len"], params.encoding)
    )

    # averaged here, so that a worker gets at most max_size x max_size values, whatever max_len is
    pe, pe_cell = fig.block_average(np.load(layout.pe_matrix, mmap_mode="r"), max_size)
    batch.add(
        fig.heatmap,
        pe,
        path("pe_heatmap.png"),
        cell=pe_cell,
        **text["pe_heatmap"],
        ylabel="position pos",
        cbar="PE value",
        dpi=dpi,
        max_size=max_size,
        **colours,
    )
    for matrix, name, cbar in (
        (layout.dot_matrix, "pe_dot_product", "PE(a) . PE(b)"),
        (layout.distance_matrix, "pe_distance", "||PE(a) - PE(b)||"),
    ):
        batch.add(
            fig.heatmap,
            np.load(matrix, mmap_mode="r"),
            path(f"{name}.png"),
            **text[name],
            xlabel="position b",
            ylabel="position a",
            cbar=cbar,
            dpi=dpi,
            max_size=max_size,
            square=True,
            cell=mats["block"],
            **colours,
        )

    offsets = read_columns(layout.offset_distance_csv)
    batch.add(
        fig.offset_distance_plot,
        *(offsets[c] for c in ("k", "min_over_p", "max_over_p", "closed_form")),
        path("pe_offset_distance.png"),
        **text["pe_offset_distance"],
        dpi=dpi,
    )
    norms = read_columns(layout.pe_norms_csv)
    batch.add(
        fig.norms_plot,
        norms["position"],
        norms["norm"],
        encoded["norm_expected"],
        path("pe_norms.png"),
        **text["pe_norms"],
        dpi=dpi,
    )
