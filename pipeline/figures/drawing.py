"""The primitives every figure is drawn with (matplotlib, Agg): reproducible PNG writing (`save`), honest colour
scales, log and integer axes, word labels that never overlap, labelled heatmaps and the words as matplotlib shows
them. Each kind of figure is a module of its own beside this one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from pipeline.base.files import atomic_path  # noqa: E402
from pipeline.base.progress import Progress  # noqa: E402
from pipeline.figures import labels  # noqa: E402


def literal(text: str) -> str:
    """Words as typed: a `$` in a sentence is a dollar sign, not mathtext (which would render "$x^2$" as math or
    refuse "$\\frac{"). Every word that reaches a figure passes here; log-axis ticks keep their mathtext."""
    return text.replace("$", r"\$")


def short_text(words: Sequence[str], width: int = 80) -> str:
    """labels.short_text, literal for matplotlib."""
    return literal(labels.short_text(words, width))


def clip_label(word: str, width: int = 14) -> str:
    """labels.clip_label, literal for matplotlib."""
    return literal(labels.clip_label(word, width))


# Reproducible PNG bytes: no software/version stamp.
PNG_METADATA = {"Software": None}


# Called with (figure, path) once each figure is written, laid out as written (tests inspect the figures here).
SAVED: list = []

# No figure is larger than this (inches); at figures.dpi that bounds every PNG's pixels.
MAX_INCHES = (20.0, 16.0)


def save(fig, path: Path, dpi: int) -> None:
    """Write the figure at its own size (no tight bbox: text never grows the image), capped at MAX_INCHES, with
    matplotlib's savefig at `dpi`. Figures lay themselves out: the layout engine (constrained layout) runs once,
    here at `dpi`, and is then removed, because savefig would run it in a draw of its own before rendering, a
    second pass over every artist (same bytes; docs/benchmarks-measurements.md#figures). Written
    atomically; then the SAVED hooks see the figure as written."""
    fig.set_size_inches(np.minimum(fig.get_size_inches(), MAX_INCHES))
    fig.set_dpi(dpi)  # so that the figure the hooks see is laid out and measured at the dpi it was written at
    engine = fig.get_layout_engine()
    if engine is not None:
        engine.execute(fig)
        fig.set_layout_engine(None)  # no engine (matplotlib's default rcParams): savefig renders once
    with atomic_path(path, suffix=".png") as tmp:
        fig.savefig(tmp, dpi=dpi, format="png", metadata=PNG_METADATA)
    for hook in SAVED:
        hook(fig, path)
    plt.close(fig)


# ---------------------------------------------------------------- honest colours, ticks and titles

DIVERGING = {
    "RdBu",
    "RdBu_r",
    "coolwarm",
    "bwr",
    "seismic",
    "PiYG",
    "PRGn",
    "BrBG",
    "PuOr",
    "RdGy",
    "RdYlBu",
    "RdYlGn",
    "Spectral",
}


def centred_at_zero(values: np.ndarray) -> bool:
    """Data a diverging map may show: it has both signs, and the smaller side reaches half the larger one."""
    lo, hi = float(np.nanmin(values)), float(np.nanmax(values))
    return lo < 0 < hi and min(-lo, hi) >= 0.5 * max(-lo, hi)


def colour_scale(values: np.ndarray, diverging: str, sequential: str, centred: bool | None = None) -> dict:
    """imshow's cmap, vmin and vmax: the diverging map with 0 in the middle for data centred at 0 (`centred`:
    declared by the figure, None: decided by `centred_at_zero`), otherwise the sequential map over the data."""
    values = np.asarray(values, dtype=np.float64)
    if centred_at_zero(values) if centred is None else centred:
        lim = float(np.nanmax(np.abs(values))) or 1.0
        return {"cmap": diverging, "vmin": -lim, "vmax": lim}
    return {"cmap": sequential, "vmin": float(np.nanmin(values)), "vmax": float(np.nanmax(values))}


def log10_values(values: Any) -> np.ndarray:
    """log10 of positive values, each correctly rounded (pipeline.core.portable.cr_log10). A log axis plots these on
    a linear axis (log_axis): matplotlib's own log scale takes numpy's log10, whose last bits vary by CPU, and a
    pixel with them now and then."""
    from pipeline.core.portable import cr_log10

    return np.array([cr_log10(v) for v in np.asarray(values, dtype=np.float64).reshape(-1).tolist()]).reshape(
        np.shape(values)
    )


def log_axis(axis, plain: bool = False, subs: Sequence[int] = (2, 3, 4, 5, 6, 7, 8, 9)) -> None:
    """Tick and label an axis whose data are log10 values (log10_values) as a logarithmic axis: major ticks at the
    integers k, labelled 10^k (plain: the number itself, "0.1"), minor ticks at log10(m) + k for m in `subs`
    (labelled too when plain)."""
    from matplotlib.ticker import FuncFormatter, Locator, MultipleLocator

    # numpy's log10, not portable.cr_log10: a minor tick lies on no pixel boundary, so another CPU's last bit moves it
    # across one with probability below 1e-10 (docs/reliability.md#last-bit-noise, tests/test_last_bit_noise.py)
    offsets = [(m, float(np.log10(m))) for m in subs]

    class MinorTicks(Locator):
        def __call__(self):
            lo, hi = sorted(self.axis.get_view_interval())
            return [
                k + o for k in range(int(np.floor(lo)), int(np.ceil(hi)) + 1) for _, o in offsets if lo <= k + o <= hi
            ]

    def number(value: float) -> str:
        k = int(np.floor(value + 1e-9))
        m = next((m for m, o in offsets if abs(value - k - o) < 1e-9), 1)
        return f"{float(f'{m}e{k}'):g}"  # parsed from decimal text: exact, whatever the machine

    axis.set_major_locator(MultipleLocator(1.0))
    axis.set_minor_locator(MinorTicks())
    if plain:
        axis.set_major_formatter(FuncFormatter(lambda v, _: number(v)))
        axis.set_minor_formatter(FuncFormatter(lambda v, _: number(v)))
    else:
        axis.set_major_formatter(FuncFormatter(lambda v, _: f"$10^{{{int(round(v))}}}$"))


def integer_ticks(*axes) -> None:
    """Ticks only at whole numbers (positions, offsets, dimensions): never 2.5 for an integer axis."""
    from matplotlib.ticker import MaxNLocator

    for axis in axes:
        axis.set_major_locator(MaxNLocator(integer=True))


# ---------------------------------------------------------------- word labels that never overlap

# Where a label goes around its point, in order of preference: right, above, left, below, then the diagonals.
DIRECTIONS = [(1, 0), (0, 1), (-1, 0), (0, -1), (1, 1), (-1, 1), (-1, -1), (1, -1)]


def place_labels(
    ax, xy: np.ndarray, texts: Sequence[str], *, marker_pt: float, fontsize: float, rings: int = 6, **text_kw
) -> int:
    """Label each point of xy (n, 2, data coordinates) in the first free spot around it.

    A spot is free when the label stays inside the axes and overlaps neither another label nor a marker
    (radius marker_pt points); spots further out get a leader line. A label without a free spot is left out.
    The axes' limits must be final (the figure is laid out by hand). Returns the number of labels left out.
    Each label's spots (rings x DIRECTIONS, in that order) are tested against everything placed at once, as arrays
    (the tests of matplotlib's Bbox.contains and Bbox.overlaps, on the same float64 extents): the cost of a label
    stays about constant however many are placed (docs/benchmarks-measurements.md#figures).

    Longer than 60 lines because the placement loop is one vectorised test per label that reads best in one piece.
    """
    fig = ax.figure
    ax.apply_aspect()
    renderer = fig.canvas.get_renderer()
    px = fig.dpi / 72.0  # pixels per point
    frame = ax.get_window_extent(renderer).padded(-2)
    (fx0, fx1), (fy0, fy1) = frame.intervalx, frame.intervaly
    points = ax.transData.transform(np.asarray(xy, dtype=np.float64))
    r = marker_pt * px
    taken = np.empty((len(points) + len(texts), 4))  # extents (x0, y0, x1, y1) of the markers, then the labels placed
    taken[: len(points)] = np.column_stack([points[:, 0] - r, points[:, 1] - r, points[:, 0] + r, points[:, 1] + r])
    count = len(points)
    ring_of = np.repeat(np.arange(rings), len(DIRECTIONS))
    ux, uy = (np.tile(np.array([d[axis] for d in DIRECTIONS]), rings) for axis in (0, 1))
    gap, step = 2 * px, 0.6 * fontsize * px
    left_out = 0
    progress = Progress("figures: word labels of an axes", len(texts))  # a long sentence takes minutes
    for done, ((x, y), point, text) in enumerate(zip(points, np.asarray(xy, dtype=np.float64), texts)):
        progress.update(done)
        probe = ax.annotate(text, point, fontsize=fontsize, **text_kw)
        w, h = probe.get_window_extent(renderer).size + 2 * gap
        probe.remove()
        x0 = x + ux * (w / 2 + r + ring_of * step) - w / 2  # Bbox.from_bounds(x0, y0, w, h) of each spot
        y0 = y + uy * (h / 2 + r + ring_of * step) - h / 2
        x1, y1 = x0 + w, y0 + h
        inside = _within(x0, fx0, fx1) & _within(y0, fy0, fy1) & _within(x1, fx0, fx1) & _within(y1, fy0, fy1)
        placed = taken[:count]
        overlaps = (
            (x0[:, None] <= placed[:, 2])
            & (placed[:, 0] <= x1[:, None])
            & (y0[:, None] <= placed[:, 3])
            & (placed[:, 1] <= y1[:, None])
        ).any(axis=1)
        free = np.flatnonzero(inside & ~overlaps)
        if not len(free):
            left_out += 1
            continue
        k = free[0]
        taken[count] = x0[k], y0[k], x1[k], y1[k]
        count += 1
        leader = (
            {
                "arrowprops": {
                    "arrowstyle": "-",
                    "connectionstyle": straight_connection,
                    "color": "0.5",
                    "lw": 0.6,
                    "shrinkA": 0,
                    "shrinkB": marker_pt,
                }
            }
            if ring_of[k]
            else {}
        )
        ax.annotate(
            text,
            point,
            xytext=((x0[k] + w / 2 - x) / px, (y0[k] + h / 2 - y) / px),
            textcoords="offset points",
            ha="center",
            va="center",
            fontsize=fontsize,
            zorder=4,
            gid="word-label",
            **leader,
            **text_kw,
        )
    return left_out


def straight_connection(posA, posB, shrinkA: float = 0.0, shrinkB: float = 0.0, patchA=None, patchB=None):
    """A FancyArrowPatch connection (its `connectionstyle`) that is a straight (MOVETO, LINETO) path from posA to posB
    (display coordinates), leaving the box of patchA (a label's) and shortened by shrinkA / shrinkB (display units)
    at its ends. matplotlib's default "arc3" draws a straight arrow as a degenerate quadratic curve, which the Agg
    renderer flattens differently on a build that fuses multiply-adds (aarch64): the figure's pixels would depend on
    the CPU."""
    from matplotlib.path import Path as MplPath

    (x0, y0), (x1, y1) = posA, posB
    dx, dy = x1 - x0, y1 - y0
    length = np.sqrt(dx * dx + dy * dy)
    start = 0.0
    if patchA is not None and length > 0:  # where the segment leaves the label's box (its bounding rectangle)
        box = patchA.get_window_extent()
        exits = [
            (edge - origin) / step
            for origin, step, lo, hi in ((x0, dx, box.x0, box.x1), (y0, dy, box.y0, box.y1))
            if step != 0
            for edge in (lo, hi)
            if (edge - origin) / step > 0
        ]
        start = min([1.0, *exits])
    if length > 0:
        start = min(1.0, start + shrinkA / length)
        stop = max(start, 1.0 - shrinkB / length)
    else:
        stop = start
    return MplPath(
        [(x0 + start * dx, y0 + start * dy), (x0 + stop * dx, y0 + stop * dy)], [MplPath.MOVETO, MplPath.LINETO]
    )


def _within(values: np.ndarray, low: float, high: float) -> np.ndarray:
    """Bbox.containsx / containsy of each value: in the closed interval between `low` and `high`, either way round."""
    return ((low <= values) & (values <= high)) | ((low >= values) & (values >= high))


def left_out_note(left_out: int, total: int) -> str:
    return f"\n{left_out} of {total} labels left out (no room)" if left_out else ""


def block_average(matrix: np.ndarray, max_size: int) -> tuple[np.ndarray, tuple[int, int]]:
    """Average non-overlapping blocks so that no side exceeds max_size (each axis on its own).

    matrix: (rows, cols). Returns (averaged matrix, (row factor, column factor)); trailing rows or
    columns that do not fill a block are dropped.
    """
    fr, fc = (max(1, -(-side // max_size)) for side in matrix.shape)
    if fr == fc == 1:
        return np.asarray(matrix), (1, 1)
    rows, cols = (matrix.shape[0] // fr) * fr, (matrix.shape[1] // fc) * fc
    trimmed = np.asarray(matrix[:rows, :cols], dtype=np.float64)
    return trimmed.reshape(rows // fr, fr, cols // fc, fc).mean(axis=(1, 3)), (fr, fc)


def heatmap(
    matrix: np.ndarray,
    path: Path,
    *,
    title: str,
    xlabel: str,
    ylabel: str,
    cbar: str,
    dpi: int,
    max_size: int,
    cmap: str = "RdBu",
    sequential: str = "viridis",
    square: bool = False,
    centred: bool | None = None,
    cell: int | tuple[int, int] = 1,
) -> None:
    """The matrix as a colour map with position 0 at the bottom left (as the notebook's pcolormesh).

    cmap: the diverging map, used only for data centred at 0 (`colour_scale`), else `sequential`;
    cell: positions per matrix entry (rows, columns) when the matrix already holds block means."""
    shown, (fr, fc) = block_average(np.asarray(matrix, dtype=np.float64), max_size)
    cr, cc = (cell, cell) if isinstance(cell, int) else cell
    fr, fc = fr * cr, fc * cc
    if fr > 1 or fc > 1:
        title += f"\n(block-averaged {fr}x{fc} for display)"
    title = labels.wrap(title, 62 if square else 75)
    fig, ax = plt.subplots(figsize=(7.5, 6.5) if square else (9, 6), layout="constrained")
    extent = (0, shown.shape[1] * fc, 0, shown.shape[0] * fr)
    image = ax.imshow(
        shown,
        origin="lower",
        aspect="equal" if square else "auto",
        extent=extent,
        interpolation="nearest",
        **colour_scale(shown, cmap, sequential, centred),
    )
    fig.colorbar(image, ax=ax, label=cbar)
    ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
    integer_ticks(ax.xaxis, ax.yaxis)
    save(fig, path, dpi)


def padded_limits(coords: np.ndarray, pad: float = 0.12) -> tuple[tuple[float, float], tuple[float, float]]:
    """x and y limits around (n, 2) points with `pad` of the larger range on every side."""
    lo, hi = coords.min(axis=0), coords.max(axis=0)
    margin = pad * float((hi - lo).max()) or 1.0
    return (lo[0] - margin, hi[0] + margin), (lo[1] - margin, hi[1] + margin)


def equal_aspect_limits(ax, xlim, ylim):
    """Widen xlim or ylim so that one data unit is as long on both axes of ax's box (equal aspect, fixed box)."""
    box = ax.get_position().transformed(ax.figure.transFigure)
    (x0, x1), (y0, y1) = xlim, ylim
    per_unit = min(box.width / (x1 - x0), box.height / (y1 - y0))
    dx, dy = box.width / per_unit - (x1 - x0), box.height / per_unit - (y1 - y0)
    ax.set_aspect("equal", adjustable="box")
    return (x0 - dx / 2, x1 + dx / 2), (y0 - dy / 2, y1 + dy / 2)
