"""Plotting primitives: labelled heatmaps, 2-D word projections, PE property curves (matplotlib, Agg)."""
from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from pipeline.files import atomic_path  # noqa: E402

# Reproducible PNG bytes: no software/version stamp.
PNG_METADATA = {"Software": None}


def save(fig, path: Path, dpi: int) -> None:
    with atomic_path(path, suffix=".png") as tmp:
        fig.savefig(tmp, dpi=dpi, format="png", metadata=PNG_METADATA, bbox_inches="tight")
    plt.close(fig)


def block_average(matrix: np.ndarray, max_size: int) -> tuple[np.ndarray, int]:
    """Average non-overlapping f x f blocks so that no side exceeds max_size. Returns (matrix, f)."""
    factor = max(1, int(np.ceil(max(matrix.shape) / max_size)))
    if factor == 1:
        return matrix, 1
    rows, cols = (matrix.shape[0] // factor) * factor, (matrix.shape[1] // factor) * factor
    trimmed = matrix[:rows, :cols]
    return trimmed.reshape(rows // factor, factor, cols // factor, factor).mean(axis=(1, 3)), factor


def heatmap(matrix: np.ndarray, path: Path, *, title: str, xlabel: str, ylabel: str, cbar: str,
            dpi: int, max_size: int, cmap: str = "RdBu", square: bool = False, centered: bool = False) -> None:
    """The matrix as a colour map with position 0 at the bottom left (as the notebook's pcolormesh)."""
    shown, factor = block_average(np.asarray(matrix, dtype=np.float64), max_size)
    if factor > 1:
        title += f"\n(block-averaged {factor}x{factor} for display)"
    fig, ax = plt.subplots(figsize=(7.5, 6.5) if square else (9, 6))
    lim = float(np.abs(shown).max()) or 1.0
    extent = (0, shown.shape[1] * factor, 0, shown.shape[0] * factor)
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


def norms_plot(norms: np.ndarray, expected: float, path: Path, *, title: str, dpi: int) -> None:
    fig, ax = plt.subplots(figsize=(9, 4.5))
    ax.plot(np.arange(len(norms)), norms, marker=".", label="||PE(pos)||")
    ax.axhline(expected, color="tab:red", linestyle="--", label=f"sqrt(d/2) = {expected:.7f}")
    dev = float(np.abs(norms - expected).max())
    ax.set(title=f"{title}\nmax |norm - sqrt(d/2)| = {dev:.2e}", xlabel="position", ylabel="Euclidean norm")
    pad = max(10 * dev, 1e-3 * expected)
    ax.set_ylim(expected - pad, expected + pad)
    ax.legend(loc="lower right")
    save(fig, path, dpi)


def offset_distance_plot(k: np.ndarray, lo: np.ndarray, hi: np.ndarray, closed: np.ndarray, path: Path, *,
                         title: str, dpi: int) -> None:
    fig, ax = plt.subplots(figsize=(9, 4.5))
    ax.fill_between(k, lo, hi, alpha=0.35, label="min..max over every position p")
    ax.plot(k, hi, marker="o", markersize=3, label="max over p")
    ax.plot(k, closed, linestyle="--", color="black", label="closed form sqrt(sum_i 2 - 2 cos(k w_i))")
    spread = float((hi - lo).max()) if len(k) else 0.0
    ax.set(title=f"{title}\nlargest spread over p: {spread:.2e}", xlabel="offset k (positions apart)",
           ylabel="||PE(p) - PE(p + k)||")
    ax.legend(loc="lower right")
    ax.grid(True, alpha=0.3)
    save(fig, path, dpi)


def wrap(text: str, width: int = 70) -> str:
    return "\n".join(textwrap.wrap(text, width))
