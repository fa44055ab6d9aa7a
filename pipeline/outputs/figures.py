"""Plotting primitives: labelled heatmaps, 2-D word projections, PE property curves (matplotlib, Agg)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from pipeline.base.files import atomic_path, round_significant  # noqa: E402
from pipeline.base.progress import Progress  # noqa: E402
from pipeline.outputs import figure_plan  # noqa: E402
from pipeline.outputs.figure_plan import group_colours, wrap  # noqa: E402, F401 (re-exported)


def literal(text: str) -> str:
    """Words as typed: a `$` in a sentence is a dollar sign, not mathtext (which would render "$x^2$" as math or
    refuse "$\\frac{"). Every word that reaches a figure passes here; log-axis ticks keep their mathtext."""
    return text.replace("$", r"\$")


def short_text(words: Sequence[str], width: int = 80) -> str:
    """figure_plan.short_text, literal for matplotlib."""
    return literal(figure_plan.short_text(words, width))


def clip_label(word: str, width: int = 14) -> str:
    """figure_plan.clip_label, literal for matplotlib."""
    return literal(figure_plan.clip_label(word, width))


# Reproducible PNG bytes: no software/version stamp.
PNG_METADATA = {"Software": None}


class Batch:
    """Figure jobs, drawn in this process (workers=1) or by forked workers. A job is a function and its arguments;
    it draws one figure (or several, and returns their names). Workers are forked, so they start with matplotlib
    already imported; a job gets plain arrays and only draws (numpy and matplotlib). Workers take jobs one at a time
    in the order queued: queue the longest first. Output is the same whatever the number of workers.

    `run(workers)` draws the jobs queued so far. Inside `drawing(workers)` each job goes to the workers as it is
    queued, so that they draw while this process computes the next job's data (the encode stage: enter it before
    importing torch, so that the workers are forked small and before any torch thread exists).

    With `cache` (a sweep's pipeline.outputs.figure_cache folder), a job (`add`, in `run`) whose arguments an earlier
    job of the sweep had, with its outputs in `out` at the same names, links that job's figures instead of drawing
    them.
    """

    def __init__(self, out: Path | None = None, cache: Path | None = None) -> None:
        self.out, self.cache = out, cache
        self.jobs: list[tuple] = []
        self._pool = None  # inside drawing(): the workers' pool
        self._sent: list = []  # inside drawing(): each job's pending result, in the order queued

    @property
    def forked(self) -> bool:
        """Whether forked workers are drawing the jobs as they are queued (inside drawing(), with workers)."""
        return self._pool is not None

    def add(self, draw, *args, **kwargs) -> None:
        self.jobs.append((draw, args, kwargs))
        if self._pool is not None:
            self._sent.append(self._pool.apply_async(_draw, (self.jobs[-1],)))

    @contextlib.contextmanager
    def drawing(self, workers: int, what: str = "figures") -> Iterator[list]:
        """Draw every job queued inside the block as it is queued (by min(workers, cores) forked workers, started
        on entry), and wait for them at its end; yields the list that then holds their results, in the order queued.
        One worker: the jobs are drawn at the block's end, in this process. An error inside the block or in a job
        ends the workers."""
        from pipeline.base import worker_pool

        results: list = []
        workers = min(workers, worker_pool.usable_cores())
        if workers < 2 or not worker_pool.fork_available():
            yield results
            results += self.run(1, what)
            return
        with worker_pool.pool(workers) as pool:
            self._pool, self._sent = pool, []
            try:
                for job in self.jobs:  # queued before the block
                    self._sent.append(pool.apply_async(_draw, (job,)))
                yield results
                progress = Progress(what, len(self._sent))
                for done, sent in enumerate(self._sent, 1):
                    results.append(sent.get())
                    progress.update(done)
            finally:
                self._pool, self._sent = None, []

    def run(self, workers: int, what: str = "figures") -> list:
        """Draw every queued job (or link it from the cache); returns their results in the order queued. A draw
        longer than a few seconds logs its progress as `<what> 12/57 (21%), about 30 s left`."""
        results: list = [None] * len(self.jobs)
        to_draw, to_store = list(range(len(self.jobs))), {}
        if self.cache is not None and self.out is not None:
            from pipeline.outputs import figure_cache

            for k in list(to_draw):
                keyed = figure_cache.job_key(self.jobs[k], self.out)
                if keyed is None:
                    continue
                entry, outputs = self.cache / keyed[0], keyed[1]
                found, results[k] = figure_cache.restore(entry, outputs)
                if found:
                    to_draw.remove(k)
                else:
                    to_store[k] = entry, outputs
        self._draw_jobs(to_draw, workers, results, Progress(what, len(to_draw)))
        for k, (entry, outputs) in to_store.items():
            figure_cache.store(entry, outputs, results[k])
        return results

    def _draw_jobs(self, indices: list[int], workers: int, results: list, progress: Progress) -> None:
        """Draw the jobs `indices` into `results`, counting each drawn in `progress`."""
        from pipeline.base import worker_pool

        workers = min(workers, len(indices), worker_pool.usable_cores()) if workers > 1 else 0
        with worker_pool.imap(_draw, [self.jobs[k] for k in indices], workers) as drawn:  # in order, as drawn
            for done, (k, result) in enumerate(zip(indices, drawn), 1):
                results[k] = result
                progress.update(done)


def _draw(job: tuple):
    draw, args, kwargs = job
    return draw(*args, **kwargs)


# Called with (figure, path) once each figure is written, laid out as written (tests inspect the figures here).
SAVED: list = []

# No figure is larger than this (inches); at figures.dpi that bounds every PNG's pixels.
MAX_INCHES = (20.0, 16.0)


def save(fig, path: Path, dpi: int) -> None:
    """Write the figure at its own size (no tight bbox: text never grows the image), capped at MAX_INCHES, with
    matplotlib's savefig at `dpi`. Figures lay themselves out: the layout engine (constrained layout) runs once,
    here at `dpi`, and is then removed, because savefig would run it in a draw of its own before rendering, a
    second pass over every artist (15% of the encode stage's figure CPU time, measured; same bytes). Written
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

    from pipeline.core.portable import cr_log10

    offsets = [(m, cr_log10(m)) for m in subs]

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
    stays about constant however many are placed (one at a time, a 1,000-word sentence took minutes).
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
    title = wrap(title, 62 if square else 75)
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
    three rows (15 panels), the title says when pairs are left out."""
    colours, legend = group_colours(words, groups)
    if len(panels) > 15:
        title += f"\n(the first 15 of {len(panels)} weight pairs)"
        panels, titles = panels[:15], titles[:15]
    ncols = min(5, len(panels))
    nrows = -(-len(panels) // ncols)
    legend_rows = -(-len(legend) // 5) + 1  # entries, and the legend's title
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


def ratio_curves(
    ratios: np.ndarray,
    curves: dict[str, np.ndarray],
    path: Path,
    *,
    title: str,
    r_star: float | None,
    marks: dict[str, float],
    dpi: int,
) -> None:
    """Metrics against r = W2/W1 (log axis), the crossover r* and the named weight pairs marked."""
    fig, ax = plt.subplots(figsize=(12, 5.2), layout="constrained")
    log_r = log10_values(ratios)
    for label, values in curves.items():
        ax.plot(log_r, values, label=label, linewidth=1.8)
    log_axis(ax.xaxis)
    styles = [":", "-.", (0, (1, 3)), (0, (5, 2)), (0, (3, 1, 1, 1))]
    for i, (name, r) in enumerate(marks.items()):
        ax.axvline(
            log10_values(r),
            color="0.35",
            linestyle=styles[i % len(styles)],
            linewidth=1.2,
            label=f"{name} (r = {r:.3g})",
        )
    if r_star is not None:
        ax.axvline(
            log10_values(r_star),
            color="black",
            linestyle="--",
            linewidth=2,
            label=f"r* = {r_star:.3g}: positional neighbours overtake semantic ones",
        )
    ax.set(
        xlabel="r = W2 / W1 (weight of the positional encoding relative to the word embedding)", ylabel="metric value"
    )
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=9)
    save(fig, path, dpi)


def crossover_summary(r_star: Sequence[float | None], path: Path, *, shown: int, dpi: int) -> None:
    """Histogram of the crossover r* of every sentence (None: no crossover on the ratio grid), for a texts file
    with more sentences than get figures of their own."""
    found = np.array([r for r in r_star if r is not None], dtype=np.float64)
    fig, ax = plt.subplots(figsize=(9, 4.5), layout="constrained")
    if len(found):
        log_found = log10_values(found)
        lo, hi = float(log_found.min()), float(log_found.max())
        ax.hist(log_found, bins=np.linspace(lo - 0.05, hi + 0.05, 31), color="tab:blue", edgecolor="white")
        median = float(np.median(found))
        ax.axvline(log10_values(median), color="black", linestyle="--", label=f"median r* = {median:.3g}")
        ax.legend(loc="upper right")
    log_axis(ax.xaxis)
    integer_ticks(ax.yaxis)
    ax.set(
        xlabel="r* = W2 / W1 where positional neighbours overtake semantic ones",
        ylabel="sentences",
        title=f"Crossover r* of all {len(r_star)} sentences ({len(r_star) - len(found)} without a crossover on "
        f"the grid)\nper-sentence figures for the first {shown} only (figures.max_sentences)",
    )
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


RATIO_CURVES = {  # label in the ratio-sweep figure -> column of reports/plots/ratio_sweep.csv
    "k-NN overlap with word embeddings (d-dim)": "knn_semantic_hd",
    "k-NN overlap with positional encodings (d-dim)": "knn_positional_hd",
    "trustworthiness of the 2-D picture": "trustworthiness_2d",
    "rank correlation of distance with |i - j|": "positional_rank_corr_hd",
    "Procrustes disparity vs embeddings-only picture": "pca_disparity",
}


def ratio_marks(pairs: Sequence[dict], d: int) -> dict[str, float]:
    """The ratios r = W2/W1 marked in the ratio-sweep figures: the Transformer's scaling, then every configured
    pair with W2 > 0 (pairs: projections.json's pairs), each ratio once."""
    import math

    marks = {"Transformer scaling W1=sqrt(d), W2=1": 1 / math.sqrt(d)}
    for pair in pairs:
        r = pair["w2"] / pair["w1"] if pair["w1"] > 0 else 0.0
        if r > 0 and all(not math.isclose(r, seen) for seen in marks.values()):
            marks[pair["title"]] = r
    return marks
