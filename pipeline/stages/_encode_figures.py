"""The figures of the encode stage's data, drawn by that stage (reports/figures/encode/): the encoding matrix, its
dot products and distances and the two property plots (kind `encoding`), RoPE's and ALiBi's (kind `relative`) and
the families' properties and RoPE scalings (kind `properties`, both pipeline.outputs.relative_figures) and the
tutorials' (kind `tutorials`). Drawn where their data is computed, so that
a change of the weights (`sweep.*`) re-draws none of them (the figures stage draws the sweep's).
"""

from __future__ import annotations

import logging
from pathlib import Path

from pipeline.base.paths import Layout

log = logging.getLogger("pipeline")

KINDS = frozenset(
    {"encoding", "relative", "properties", "tutorials"}
)  # the kinds of pipeline.config.figure_sets drawn here


def draw_encode_figures(params: dict, layout: Layout) -> list[str]:
    """The configured set's figures of these kinds, into a fresh folder swapped in at the end (no figure of an older
    config lingers); returns the PNG names."""
    from pipeline.base.files import replace_dir

    names: list[str] = []
    replace_dir(layout.encode_figures_dir, lambda tmp: names.extend(render(params, layout, tmp)))
    if names:
        log.info("figures: %d PNG files in %s", len(names), layout.encode_figures_dir)
    return names


def render(params: dict, layout: Layout, out: Path) -> list[str]:
    """Queue a job per figure (figures.name selects the kinds), then draw them (figures.workers processes); the
    tutorials use torch and are drawn in this process while the workers draw the rest. Returns the PNG names."""
    from pipeline.config.figure_sets import drawn_kinds

    cfg = params.figures
    kinds = drawn_kinds(cfg.name) & KINDS
    if not kinds:
        return []
    from pipeline.outputs import figures as fig
    from pipeline.outputs.relative_figures import queue_property_figures, queue_relative_figures

    written: list[str] = []
    batch = fig.Batch(out)

    def path(name: str) -> Path:
        written.append(name)
        return out / name

    if "tutorials" in kinds:
        batch.add_here(render_tutorials, params, layout, out)
    if "encoding" in kinds:
        render_encoding(params, layout, path, batch)
    if "relative" in kinds:
        queue_relative_figures(layout, cfg, path, batch)
    if "properties" in kinds:
        queue_property_figures(layout, cfg, path, batch)
    for names in batch.run(cfg.workers, "encode: figures"):
        written += names or []
    return written


def render_tutorials(params: dict, layout: Layout, out: Path) -> list[str]:
    """The tutorials' figures (pipeline.tutorials.figures); returns their names."""
    from pipeline.base.files import read_json
    from pipeline.tutorials.figures import render_tutorial_figures

    return render_tutorial_figures(params, out, root=layout.base, tokens=read_json(layout.tokens))


def render_encoding(params: dict, layout: Layout, path, batch) -> None:
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
    offsets = read_columns(layout.offset_distance_csv)
    batch.add(
        fig.offset_distance_plot,
        *(offsets[c] for c in ("k", "min_over_p", "max_over_p", "closed_form")),
        path("pe_offset_distance.png"),
        **text["pe_offset_distance"],
        dpi=dpi,
    )
