"""The notebook's picture (reports/figures/sweep/, stage figures): W1 * embedding + W2 * PE of a sentence, projected
to 2-D by PCA, one figure per weight pair (`projection`), and every pair side by side on one shared PCA basis
(`projection_panels`), the words coloured by semantic group.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from pipeline.base.files import round_significant  # noqa: E402
from pipeline.base.paths import Layout  # noqa: E402
from pipeline.figures.drawing import (  # noqa: E402
    equal_aspect_limits,
    integer_ticks,
    left_out_note,
    literal,
    padded_limits,
    place_labels,
    save,
    short_text,
    straight_connection,
)
from pipeline.figures.labels import OTHER_COLOUR, group_colours  # noqa: E402

if TYPE_CHECKING:
    from pipeline.config.schema import Config


def projection(
    coords: np.ndarray,
    words: Sequence[str],
    positions: Sequence[int],
    path: Path,
    *,
    title: str,
    explained: Sequence[float],
    dpi: int,
    cmap: str = "viridis",
) -> None:
    """Scatter of (n, 2) PCA coordinates, each point labelled 'word (position)', coloured by position.

    Laid out by hand (fixed margins for a title of up to three lines), so that labels are placed in final axes."""
    fig = plt.figure(figsize=(9, 6.5))
    ax = fig.add_axes((0.09, 0.09, 0.75, 0.75))
    points = ax.scatter(
        coords[:, 0], coords[:, 1], c=positions, cmap=cmap, s=55, zorder=3, edgecolors="black", linewidths=0.5
    )
    xlim, ylim = equal_aspect_limits(ax, *padded_limits(coords))
    ax.set(
        xlim=xlim,
        ylim=ylim,
        xlabel=f"PC1 ({100 * explained[0]:.1f}% of variance)",
        ylabel=f"PC2 ({100 * explained[1]:.1f}% of variance)",
    )
    ax.grid(True, alpha=0.3)
    bar = fig.colorbar(points, cax=fig.add_axes((0.87, 0.15, 0.025, 0.63)), label="position in the padded sequence")
    integer_ticks(bar.ax.yaxis)
    left_out = place_labels(
        ax,
        coords,
        [f"{literal(word)} ({pos})" for word, pos in zip(words, positions)],
        marker_pt=4,
        fontsize=11,
        bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.7},
    )
    ax.set_title(title + left_out_note(left_out, len(words)))
    save(fig, path, dpi)


def shared_projection(xs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Project several (n, d) point sets onto one 2-D PCA basis so that panels share axes and signs.

    Each set is centred and scaled to unit RMS first (W1 = 10 must not outweigh W1 = 1); the basis is
    the PCA of all of them stacked (the top two eigenvectors of their d x d scatter matrix), oriented as
    scikit-learn orients components. Returns (n, 2) per set, rounded to SIGNIFICANT_DIGITS of the largest
    coordinate. Exact products and a portable eigensolver (pipeline.core.portable, pipeline.core.eigen): the same
    bits on every machine.
    """
    from pipeline.core.eigen import eigh
    from pipeline.core.portable import exact_matmul

    normed = []
    for x in xs:
        centred = np.asarray(x, dtype=np.float64) - np.asarray(x, dtype=np.float64).mean(axis=0)
        rms = np.sqrt((centred * centred).sum(axis=1).mean()) or 1.0
        normed.append(centred / rms)
    stacked = np.concatenate(normed)
    stacked = stacked - stacked.mean(axis=0)
    _, vectors = eigh(exact_matmul(stacked.T, stacked))  # ascending eigenvalues
    basis = vectors[:, ::-1][:, :2].T.copy()  # (2, d): the two largest
    basis *= np.sign(basis[np.arange(2), np.abs(basis).argmax(axis=1)])[:, None]
    panels = np.stack([exact_matmul(x, basis.T) for x in normed])
    return list(round_significant(panels, floor=float(np.abs(panels).max())))


def projection_panels(
    panels: Sequence[np.ndarray],
    titles: Sequence[str],
    words: Sequence[str],
    positions: Sequence[int],
    groups: Sequence[Sequence[str]],
    path: Path,
    *,
    title: str,
    arrows: bool,
    dpi: int,
) -> None:
    """Scatter panels (five a row) on shared axes; points coloured by semantic group and numbered by position.

    Laid out by hand in inches (title, rows of panels, legend), so that labels are placed in final axes; at most
    three rows (15 panels), the title says when pairs are left out.

    Longer than 60 lines because it draws one figure top to bottom, a sequence of matplotlib calls."""
    colours, legend = group_colours(words, groups)
    if len(panels) > 15:
        title += f"\n(the first 15 of {len(panels)} weight pairs)"
        panels, titles = panels[:15], titles[:15]
    ncols = min(5, len(panels))
    nrows = -(-len(panels) // ncols)
    legend_rows = -(-max(1, len(legend)) // 5) + 1  # entries (a note when there is none), and the legend's title
    xlim, ylim = padded_limits(np.concatenate(panels), 0.08)
    # inches: title; per row the panel (its height follows the data's aspect), its title and x label; the legend
    top, bottom, gap, panel = 1.05, 0.25 + 0.25 * legend_rows, 0.85, 3.0
    panel_h = panel * float(np.clip((ylim[1] - ylim[0]) / (xlim[1] - xlim[0]), 0.4, 1.5))
    width = max(7.5, 0.9 + ncols * panel + (ncols - 1) * 0.6)
    height = top + nrows * panel_h + (nrows - 1) * gap + 0.45 + bottom
    fig = plt.figure(figsize=(width, height))
    grid = fig.add_gridspec(
        nrows,
        ncols,
        left=0.75 / width,
        right=1 - 0.15 / width,
        top=1 - top / height,
        bottom=(bottom + 0.45) / height,
        hspace=gap / panel_h,
        wspace=0.6 / panel,
    )
    left_out = 0
    for k, (coords, panel_title) in enumerate(zip(panels, titles)):
        ax = fig.add_subplot(grid[k // ncols, k % ncols])
        if arrows:
            for a, b in zip(coords[:-1], coords[1:]):
                arrow = {"arrowstyle": "->", "connectionstyle": straight_connection, "color": "0.6", "lw": 0.8}
                ax.annotate("", xy=b, xytext=a, arrowprops=arrow, zorder=1)
        ax.scatter(coords[:, 0], coords[:, 1], c=colours, s=70, zorder=3, edgecolors="black", linewidths=0.4)
        for (x, y), pos in zip(coords, positions):
            ax.text(x, y, f"{pos}", ha="center", va="center", fontsize=7, color="white", zorder=4, fontweight="bold")
        ax.set(xlim=xlim, ylim=ylim, xlabel="shared PC1", ylabel="shared PC2" if k % ncols == 0 else "")
        ax.set_title(panel_title, fontsize=10)
        ax.set_aspect("equal", adjustable="box")
        ax.grid(True, alpha=0.3)
        left_out = max(left_out, place_labels(ax, coords, [literal(w) for w in words], marker_pt=4.5, fontsize=8))
    if not legend:  # every dot grey: say why, not a legend of groups the sentence lacks
        legend = {"no word of the sentence is in a semantic group (metrics.groups)": OTHER_COLOUR}
    handles = [plt.Line2D([], [], marker="o", linestyle="", color=c, label=g) for g, c in legend.items()]
    fig.legend(
        handles=handles,
        loc="lower center",
        bbox_to_anchor=(0.5, 0.1 / height),
        ncol=min(5, len(handles)),
        frameon=False,
        fontsize=9,
        title="semantic group (number in the dot = position in the sentence)",
        title_fontsize=9,
    )
    note = f"\nup to {left_out} of {len(words)} words unlabelled in a panel (no room)" if left_out else ""
    fig.suptitle(title + note, fontsize=11, y=1 - 0.1 / height, va="top")
    save(fig, path, dpi)


def render_projections(params: Config, meta: dict, shown: int, layout: Layout, path, batch) -> None:
    """The notebook's figures: one PCA projection per weight pair for each of the first `shown` sentences."""
    import numpy as np

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
                title = f"{what}, sentence {s}, d={d}, PCA to 2-D\n" + short_text(sentence["words"])
                batch.add(
                    projection,
                    coords[j],
                    sentence["words"],
                    sentence["positions"],
                    path(f"projection_s{s}_{pair['label']}.png"),
                    title=title,
                    explained=ratio[j],
                    dpi=params.figures.dpi,
                    cmap=params.figures.sequential_cmap,
                )
