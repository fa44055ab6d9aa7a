"""The encoding's figures (reports/figures/encode/, stage encode): the matrix PE(pos, i), its dot products and
distances between positions, the norms by position and the distance between positions k apart; their titles say
what holds for the encoding drawn (a sinusoid of even or odd d, or a learned table).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from pipeline.base.paths import Layout  # noqa: E402
from pipeline.figures.drawing import block_average, heatmap, integer_ticks, save  # noqa: E402
from pipeline.figures.labels import wrap  # noqa: E402


def norms_plot(
    positions: np.ndarray,
    norms: np.ndarray,
    expected: float,
    path: Path,
    *,
    title: str,
    dpi: int,
    reference: str = "sqrt(d/2)",
) -> None:
    """||PE(pos)|| against position, with the line sqrt(d/2) (labelled `reference`) and the largest deviation."""
    fig, ax = plt.subplots(figsize=(9, 4.5), layout="constrained")
    integer_ticks(ax.xaxis)
    ax.plot(positions, norms, marker="." if len(norms) <= 512 else None, label="||PE(pos)||")
    ax.axhline(expected, color="tab:red", linestyle="--", label=f"{reference} = {expected:.7f}")
    dev = float(np.abs(norms - expected).max())
    ax.set(title=wrap(f"{title}\nmax |norm - sqrt(d/2)| = {dev:.2e}", 85), xlabel="position", ylabel="Euclidean norm")
    pad = max(10 * dev, 1e-3 * expected)
    ax.set_ylim(expected - pad, expected + pad)
    ax.legend(loc="lower right")
    save(fig, path, dpi)


def offset_distance_plot(
    k: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    closed: np.ndarray,
    path: Path,
    *,
    title: str,
    dpi: int,
    closed_label: str = "closed form sqrt(sum_i 2 - 2 cos(k w_i))",
) -> None:
    """min..max over p of ||PE(p) - PE(p+k)|| against k (lo, hi, closed: (K,)), and the sinusoid's closed form."""
    fig, ax = plt.subplots(figsize=(9, 4.5), layout="constrained")
    integer_ticks(ax.xaxis)
    ax.fill_between(k, lo, hi, alpha=0.35, label="min..max over every position p")
    ax.plot(k, hi, marker="o", markersize=3, label="max over p")
    ax.plot(k, closed, linestyle="--", color="black", label=closed_label)
    spread = float((hi - lo).max()) if len(k) else 0.0
    ax.set(
        title=wrap(f"{title}\nlargest spread over p: {spread:.2e}", 85),
        xlabel="offset k (positions apart)",
        ylabel="||PE(p) - PE(p + k)||",
    )
    ax.legend(loc="lower right")
    ax.grid(True, alpha=0.3)
    save(fig, path, dpi)


# ---------------------------------------------------------------- what the figures say, per encoding


def encoding_tag(kind: str, d: int, n: int, cfg: Any) -> str:
    """What a title names the encoding by: 'max_len=100, d=50, base=10000' or, for a learned table, its draw."""
    if kind == "sinusoidal":
        return f"max_len={n}, d={d}, base={cfg.base:g}"
    return f"max_len={n}, d={d}, seed={cfg.seed}, {cfg.init} init, scale={cfg.scale:g}"


def encoding_figure_text(kind: str, pe_layout: str | None, d: int, tag: str) -> dict[str, dict[str, str]]:
    """Titles and labels of the five encoding figures (keys: their file stems), true for the `kind` drawn.

    A sinusoid of even d has constant norms sqrt(d/2) and distances that depend only on |a - b|; for odd d the
    unpaired last sine column bends both a little; a learned (random, untrained) table has neither property,
    and its figures must not claim them.

    Longer than 60 lines because it is a table of texts, one entry per figure and label.
    """
    xlabel = {
        "interleaved": "encoding dimension i (even: sin, odd: cos)",
        "concatenated": f"encoding dimension i (i < {(d + 1) // 2}: sin, then cos)",
    }.get(pe_layout or "", "encoding dimension i")
    if kind != "sinusoidal":
        return {
            "pe_heatmap": {
                "title": f"Learned position table PE(pos, i), random and untrained ({tag})",
                "xlabel": xlabel,
            },
            "pe_dot_product": {
                "title": f"Dot products PE(a) . PE(b) ({tag})\n"
                "diagonal: ||PE(a)||^2, which varies with a; no pattern in a - b elsewhere"
            },
            "pe_distance": {
                "title": f"Euclidean distances ||PE(a) - PE(b)|| ({tag})\n"
                "zero on the diagonal; elsewhere unrelated to |a - b|"
            },
            "pe_norms": {
                "title": f"Norms of the learned table vary with the position, unlike the sinusoid's "
                f"constant sqrt(d/2) ({tag})",
                "reference": "sinusoid's sqrt(d/2), for reference",
            },
            "pe_offset_distance": {
                "title": f"||PE(p) - PE(p+k)|| of the learned table depends on p, not only on k ({tag})",
                "closed_label": "the sinusoid's closed form, for reference",
            },
        }
    if d % 2 == 0:
        norms = f"Property 1: every position has the same norm sqrt(d/2) ({tag})"
        offsets = f"Property 2: ||PE(p) - PE(p+k)|| depends only on k ({tag})"
    else:
        norms = (
            f"Property 1 needs even d: the unpaired sine column of d={d} moves the norm between "
            f"sqrt((d-1)/2) and sqrt((d+1)/2) ({tag})"
        )
        offsets = (
            f"Property 2 needs even d: with d={d}, ||PE(p) - PE(p+k)|| depends on k and, through the "
            f"unpaired sine column, a little on p ({tag})"
        )
    return {
        "pe_heatmap": {
            "title": f"Sinusoidal positional encoding PE(pos, i) ({tag}, {pe_layout} layout)",
            "xlabel": xlabel,
        },
        "pe_dot_product": {
            "title": f"Dot products PE(a) . PE(b) ({tag})\nlargest on the diagonal, "
            f"{'' if d % 2 == 0 else 'about '}d/2 = {d / 2:g}"
        },
        "pe_distance": {
            "title": f"Euclidean distances ||PE(a) - PE(b)|| ({tag})\nzero on the diagonal, growing with |a - b|"
        },
        "pe_norms": {"title": norms, "reference": "sqrt(d/2)"},
        "pe_offset_distance": {"title": offsets, "closed_label": "closed form sqrt(sum_i 2 - 2 cos(k w_i))"},
    }


def queue_encoding_figures(params, layout: Layout, path, batch) -> None:
    """The encoding matrix, its dot products and distances, and the two property plots.

    Longer than 60 lines because it queues the five encoding figures in one place, a short block each."""
    import numpy as np

    from pipeline.base.files import read_columns, read_json

    cfg = params.figures
    dpi, max_size = cfg.dpi, cfg.max_heatmap_size
    colours = {"cmap": cfg.cmap, "sequential": cfg.sequential_cmap}
    encoded = read_json(layout.encode_summary)
    mats = read_json(layout.matrices_info)  # layout; dot/distance.npy hold block x block means
    d, kind = encoded["d_model"], encoded["kind"]
    text = encoding_figure_text(kind, mats["layout"], d, encoding_tag(kind, d, encoded["max_len"], params.encoding))

    # averaged here, so that a worker gets at most max_size x max_size values, whatever max_len is
    pe, pe_cell = block_average(np.load(layout.pe_matrix, mmap_mode="r"), max_size)
    batch.add(
        heatmap,
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
            heatmap,
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
        offset_distance_plot,
        *(offsets[c] for c in ("k", "min_over_p", "max_over_p", "closed_form")),
        path("pe_offset_distance.png"),
        **text["pe_offset_distance"],
        dpi=dpi,
    )
    norms = read_columns(layout.pe_norms_csv, ("position", "norm"))
    batch.add(
        norms_plot,
        norms["position"],
        norms["norm"],
        encoded["norm_expected"],
        path("pe_norms.png"),
        **text["pe_norms"],
        dpi=dpi,
    )
