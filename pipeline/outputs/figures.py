"""Plotting primitives: labelled heatmaps, 2-D word projections, PE property curves (matplotlib, Agg)."""
from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from pipeline.base.files import atomic_path, round_significant  # noqa: E402

# Reproducible PNG bytes: no software/version stamp.
PNG_METADATA = {"Software": None}


class Batch:
    """Figures queued while the data is read, then drawn in parallel worker processes.

    Workers are forked, so they start with matplotlib already imported; they only draw (numpy and
    matplotlib), which is safe to fork even when the parent has used torch. Output is the same
    whatever the number of workers.
    """

    def __init__(self) -> None:
        self.jobs: list[tuple] = []

    def add(self, draw, *args, **kwargs) -> None:
        self.jobs.append((draw, args, kwargs))

    def run(self, workers: int, meanwhile=None):
        """Draw every queued figure; `meanwhile()` runs in this process during the drawing. Returns its result."""
        import multiprocessing
        import os

        workers = min(workers, len(self.jobs), os.cpu_count() or 1)
        if workers <= 1 or "fork" not in multiprocessing.get_all_start_methods():
            for job in self.jobs:
                _draw(job)
            return meanwhile() if meanwhile else None
        # Workers are ended by close() + join(), not by terminate(): a job runner that traps SIGTERM (submitit
        # logs "Bypassing signal SIGTERM") passes its handler on to forked workers, which would then never exit.
        pool = multiprocessing.get_context("fork").Pool(workers, initializer=_default_sigterm)
        try:
            pending = pool.map_async(_draw, self.jobs, chunksize=1)
            result = meanwhile() if meanwhile else None
            pending.get()
            pool.close()
        except BaseException:
            pool.terminate()
            raise
        finally:
            pool.join()
        return result


def _default_sigterm() -> None:
    import signal

    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _draw(job: tuple) -> None:
    draw, args, kwargs = job
    draw(*args, **kwargs)


def save(fig, path: Path, dpi: int) -> None:
    with atomic_path(path, suffix=".png") as tmp:
        fig.savefig(tmp, dpi=dpi, format="png", metadata=PNG_METADATA, bbox_inches="tight")
    plt.close(fig)


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


def heatmap(matrix: np.ndarray, path: Path, *, title: str, xlabel: str, ylabel: str, cbar: str,
            dpi: int, max_size: int, cmap: str = "RdBu", square: bool = False, centered: bool = False,
            cell: int | tuple[int, int] = 1) -> None:
    """The matrix as a colour map with position 0 at the bottom left (as the notebook's pcolormesh).

    cell: positions per matrix entry (rows, columns) when the matrix already holds block means."""
    shown, (fr, fc) = block_average(np.asarray(matrix, dtype=np.float64), max_size)
    cr, cc = (cell, cell) if isinstance(cell, int) else cell
    fr, fc = fr * cr, fc * cc
    if fr > 1 or fc > 1:
        title += f"\n(block-averaged {fr}x{fc} for display)"
    fig, ax = plt.subplots(figsize=(7.5, 6.5) if square else (9, 6))
    lim = float(np.abs(shown).max()) or 1.0
    extent = (0, shown.shape[1] * fc, 0, shown.shape[0] * fr)
    image = ax.imshow(shown, origin="lower", cmap=cmap, aspect="equal" if square else "auto", extent=extent,
                      interpolation="nearest", vmin=-lim if centered else None, vmax=lim if centered else None)
    fig.colorbar(image, ax=ax, label=cbar)
    ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
    save(fig, path, dpi)


def projection(coords: np.ndarray, words: Sequence[str], positions: Sequence[int], path: Path, *,
               title: str, explained: Sequence[float], dpi: int) -> None:
    """Scatter of (n, 2) PCA coordinates, each point labelled 'word (position)', coloured by position."""
    fig, ax = plt.subplots(figsize=(9, 6.5))
    points = ax.scatter(coords[:, 0], coords[:, 1], c=positions, cmap="viridis", s=55, zorder=3,
                        edgecolors="black", linewidths=0.5)
    ax.set_aspect("equal", adjustable="datalim")
    ax.margins(0.12)
    labels = [ax.text(x, y, f"{word} ({pos})", fontsize=11, zorder=4, ha="left", va="bottom",
                      bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.7})
              for (x, y), word, pos in zip(coords, words, positions)]
    from adjustText import adjust_text  # moves labels apart so that none hides another

    adjust_text(labels, x=coords[:, 0], y=coords[:, 1], ax=ax, expand=(1.3, 1.8), force_static=(0.4, 0.6),
                arrowprops={"arrowstyle": "-", "color": "0.5", "lw": 0.6})
    ax.grid(True, alpha=0.3)
    fig.colorbar(points, ax=ax, label="position in the padded sequence", shrink=0.8)
    ax.set(title=title, xlabel=f"PC1 ({100 * explained[0]:.1f}% of variance)",
           ylabel=f"PC2 ({100 * explained[1]:.1f}% of variance)")
    save(fig, path, dpi)


def norms_plot(positions: np.ndarray, norms: np.ndarray, expected: float, path: Path, *, title: str,
               dpi: int, reference: str = "sqrt(d/2)") -> None:
    """||PE(pos)|| against position, with the line sqrt(d/2) (labelled `reference`) and the largest deviation."""
    fig, ax = plt.subplots(figsize=(9, 4.5))
    ax.plot(positions, norms, marker="." if len(norms) <= 512 else None, label="||PE(pos)||")
    ax.axhline(expected, color="tab:red", linestyle="--", label=f"{reference} = {expected:.7f}")
    dev = float(np.abs(norms - expected).max())
    ax.set(title=f"{title}\nmax |norm - sqrt(d/2)| = {dev:.2e}", xlabel="position", ylabel="Euclidean norm")
    pad = max(10 * dev, 1e-3 * expected)
    ax.set_ylim(expected - pad, expected + pad)
    ax.legend(loc="lower right")
    save(fig, path, dpi)


def offset_distance_plot(k: np.ndarray, lo: np.ndarray, hi: np.ndarray, closed: np.ndarray, path: Path, *,
                         title: str, dpi: int, closed_label: str = "closed form sqrt(sum_i 2 - 2 cos(k w_i))") -> None:
    """min..max over p of ||PE(p) - PE(p+k)|| against k (lo, hi, closed: (K,)), and the sinusoid's closed form."""
    fig, ax = plt.subplots(figsize=(9, 4.5))
    ax.fill_between(k, lo, hi, alpha=0.35, label="min..max over every position p")
    ax.plot(k, hi, marker="o", markersize=3, label="max over p")
    ax.plot(k, closed, linestyle="--", color="black", label=closed_label)
    spread = float((hi - lo).max()) if len(k) else 0.0
    ax.set(title=f"{title}\nlargest spread over p: {spread:.2e}", xlabel="offset k (positions apart)",
           ylabel="||PE(p) - PE(p + k)||")
    ax.legend(loc="lower right")
    ax.grid(True, alpha=0.3)
    save(fig, path, dpi)


def wrap(text: str, width: int = 70) -> str:
    return "\n".join(textwrap.wrap(text, width))


GROUP_COLOURS = ["tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown", "tab:pink",
                 "tab:olive", "tab:cyan"]


def shared_projection(xs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Project several (n, d) point sets onto one 2-D PCA basis so that panels share axes and signs.

    Each set is centred and scaled to unit RMS first (W1 = 10 must not outweigh W1 = 1); the basis is
    the PCA of all of them stacked, oriented as scikit-learn orients components. Returns (n, 2) per set,
    rounded to SIGNIFICANT_DIGITS of the largest coordinate (the SVD's last bits vary between CPUs, and
    a figure drawn from them would change bytes).
    """
    normed = []
    for x in xs:
        centred = np.asarray(x, dtype=np.float64) - np.asarray(x, dtype=np.float64).mean(axis=0)
        rms = np.sqrt((centred ** 2).sum(axis=1).mean()) or 1.0
        normed.append(centred / rms)
    stacked = np.concatenate(normed)
    _, _, vt = np.linalg.svd(stacked - stacked.mean(axis=0), full_matrices=False)
    basis = vt[:2]
    basis *= np.sign(basis[np.arange(2), np.abs(basis).argmax(axis=1)])[:, None]
    panels = np.stack([x @ basis.T for x in normed])
    return list(round_significant(panels, floor=float(np.abs(panels).max())))


def group_colours(words: Sequence[str], groups: Sequence[Sequence[str]]) -> tuple[list[str], dict[str, str]]:
    """A colour per word by semantic group (grey outside every group), and the legend's group -> colour."""
    legend, colour_of = {}, {}
    for g, group in enumerate(groups):
        colour = GROUP_COLOURS[g % len(GROUP_COLOURS)]
        legend["/".join(group)] = colour
        for word in group:
            colour_of.setdefault(word, colour)
    return [colour_of.get(w, "0.55") for w in words], legend


def projection_panels(panels: Sequence[np.ndarray], titles: Sequence[str], words: Sequence[str],
                      positions: Sequence[int], groups: Sequence[Sequence[str]], path: Path, *,
                      title: str, arrows: bool, dpi: int) -> None:
    """One row of scatter panels on shared axes; points coloured by semantic group and numbered by position."""
    colours, legend = group_colours(words, groups)
    fig, axes = plt.subplots(1, len(panels), figsize=(3.6 * len(panels), 4.4), sharex=True, sharey=True,
                             squeeze=False)
    for ax, coords, panel_title in zip(axes[0], panels, titles):
        if arrows:
            for a, b in zip(coords[:-1], coords[1:]):
                ax.annotate("", xy=b, xytext=a, arrowprops={"arrowstyle": "->", "color": "0.6", "lw": 0.8},
                            zorder=1)
        ax.scatter(coords[:, 0], coords[:, 1], c=colours, s=70, zorder=3, edgecolors="black", linewidths=0.4)
        for (x, y), pos, word in zip(coords, positions, words):
            ax.annotate(f"{pos}", (x, y), ha="center", va="center", fontsize=7, color="white", zorder=4,
                        fontweight="bold")
            ax.annotate(word, (x, y), xytext=(4, 5), textcoords="offset points", fontsize=8, zorder=4)
        ax.set_title(panel_title, fontsize=10)
        ax.set_aspect("equal", adjustable="box")
        ax.grid(True, alpha=0.3)
        ax.set_xlabel("shared PC1")
    axes[0][0].set_ylabel("shared PC2")
    handles = [plt.Line2D([], [], marker="o", linestyle="", color=c, label=g) for g, c in legend.items()]
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), frameon=False, fontsize=9,
               title="semantic group (number in the dot = position in the sentence)", title_fontsize=9)
    fig.suptitle(title, fontsize=11)
    fig.tight_layout(rect=(0, 0.1, 1, 0.95))
    save(fig, path, dpi)


def ratio_curves(ratios: np.ndarray, curves: dict[str, np.ndarray], path: Path, *, title: str,
                 r_star: float | None, marks: dict[str, float], dpi: int) -> None:
    """Metrics against r = W2/W1 (log axis), the crossover r* and the named weight pairs marked."""
    fig, ax = plt.subplots(figsize=(12, 5.2))
    for label, values in curves.items():
        ax.plot(ratios, values, label=label, linewidth=1.8)
    ax.set_xscale("log")
    styles = [":", "-.", (0, (1, 3)), (0, (5, 2)), (0, (3, 1, 1, 1))]
    for i, (name, r) in enumerate(marks.items()):
        ax.axvline(r, color="0.35", linestyle=styles[i % len(styles)], linewidth=1.2, label=f"{name} (r = {r:.3g})")
    if r_star is not None:
        ax.axvline(r_star, color="black", linestyle="--", linewidth=2,
                   label=f"r* = {r_star:.3g}: positional neighbours overtake semantic ones")
    ax.set(xlabel="r = W2 / W1 (weight of the positional encoding relative to the word embedding)",
           ylabel="metric value")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=9)
    save(fig, path, dpi)


# ---------------------------------------------------------------- what the figures say, per encoding

def encoding_tag(kind: str, d: int, n: int, cfg: dict) -> str:
    """What a title names the encoding by: 'max_len=100, d=50, base=10000' or, for a learned table, its draw."""
    if kind == "sinusoidal":
        return f"max_len={n}, d={d}, base={cfg['base']:g}"
    return f"max_len={n}, d={d}, seed={cfg['seed']}, {cfg['init']} init, scale={cfg['scale']:g}"


def encoding_figure_text(kind: str, pe_layout: str | None, d: int, tag: str) -> dict[str, dict[str, str]]:
    """Titles and labels of the five encoding figures (keys: their file stems), true for the `kind` drawn.

    A sinusoid of even d has constant norms sqrt(d/2) and distances that depend only on |a - b|; for odd d the
    unpaired last sine column bends both a little; a learned (random, untrained) table has neither property,
    and its figures must not claim them.
    """
    xlabel = {"interleaved": "encoding dimension i (even: sin, odd: cos)",
              "concatenated": f"encoding dimension i (i < {(d + 1) // 2}: sin, then cos)"}.get(pe_layout or "",
                                                                                          "encoding dimension i")
    if kind != "sinusoidal":
        return {
            "pe_heatmap": {"title": f"Learned position table PE(pos, i), random and untrained ({tag})",
                           "xlabel": xlabel},
            "pe_dot_product": {"title": f"Dot products PE(a) . PE(b) ({tag})\n"
                                        "diagonal: ||PE(a)||^2, which varies with a; no pattern in a - b elsewhere"},
            "pe_distance": {"title": f"Euclidean distances ||PE(a) - PE(b)|| ({tag})\n"
                                     "zero on the diagonal; elsewhere unrelated to |a - b|"},
            "pe_norms": {"title": f"Norms of the learned table vary with the position, unlike the sinusoid's "
                                  f"constant sqrt(d/2) ({tag})", "reference": "sinusoid's sqrt(d/2), for reference"},
            "pe_offset_distance": {"title": f"||PE(p) - PE(p+k)|| of the learned table depends on p, not only on k "
                                            f"({tag})", "closed_label": "the sinusoid's closed form, for reference"},
        }
    if d % 2 == 0:
        norms = f"Property 1: every position has the same norm sqrt(d/2) ({tag})"
        offsets = f"Property 2: ||PE(p) - PE(p+k)|| depends only on k ({tag})"
    else:
        norms = (f"Property 1 needs even d: the unpaired sine column of d={d} moves the norm between "
                 f"sqrt((d-1)/2) and sqrt((d+1)/2) ({tag})")
        offsets = (f"Property 2 needs even d: with d={d}, ||PE(p) - PE(p+k)|| depends on k and, through the "
                   f"unpaired sine column, a little on p ({tag})")
    return {
        "pe_heatmap": {"title": f"Sinusoidal positional encoding PE(pos, i) ({tag}, {pe_layout} layout)",
                       "xlabel": xlabel},
        "pe_dot_product": {"title": f"Dot products PE(a) . PE(b) ({tag})\nlargest on the diagonal, "
                                    f"{'' if d % 2 == 0 else 'about '}d/2 = {d / 2:g}"},
        "pe_distance": {"title": f"Euclidean distances ||PE(a) - PE(b)|| ({tag})\n"
                                 "zero on the diagonal, growing with |a - b|"},
        "pe_norms": {"title": norms, "reference": "sqrt(d/2)"},
        "pe_offset_distance": {"title": offsets, "closed_label": "closed form sqrt(sum_i 2 - 2 cos(k w_i))"},
    }


RATIO_CURVES = {   # label in the ratio-sweep figure -> column of reports/plots/ratio_sweep/s{i}.csv
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
