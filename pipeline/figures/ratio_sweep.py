"""When position overtakes meaning (reports/figures/sweep/, stage figures): a sentence's metrics against the ratio
r = W2/W1 with its crossover r* (`ratio_curves`), and with more sentences than figures, every sentence's r* in one
histogram (`crossover_summary`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from pipeline.base.paths import Layout  # noqa: E402
from pipeline.figures.drawing import integer_ticks, log10_values, log_axis, save  # noqa: E402


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
    # a log axis where r* spans a factor of 10 or more; a narrower spread on a plain one (a log axis would tick it once)
    log = len(found) > 0 and found.max() >= 10 * found.min()
    scale = log10_values if log else np.asarray
    if len(found):
        x, median = scale(found), float(np.median(found))
        margin = 0.05 if log else 0.02 * (x.max() - x.min()) or 0.05 * x.max()
        ax.hist(x, bins=np.linspace(x.min() - margin, x.max() + margin, 31), color="tab:blue", edgecolor="white")
        ax.axvline(scale(median), color="black", linestyle="--", label=f"median r* = {median:.3g}")
        ax.legend(loc="upper right")
    if log:
        log_axis(ax.xaxis)
    integer_ticks(ax.yaxis)
    missing = len(r_star) - len(found)
    ax.set(
        xlabel="r* = W2 / W1 where positional neighbours overtake semantic ones" + (" (log scale)" if log else ""),
        ylabel="sentences",
        title=f"Crossover r* of all {len(r_star)} sentences"
        + (f" ({missing} without a crossover on the grid)" if missing else "")
        + f"\nper-sentence figures for the first {shown} only (figures.max_sentences)",
    )
    ax.grid(True, alpha=0.3)
    save(fig, path, dpi)


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


def render_summary(layout: Layout, meta: dict, shown: int, path, batch, dpi: int) -> None:
    """More sentences than figures.max_sentences: the crossover r* of every sentence in one histogram."""
    import math

    from pipeline.base.files import read_columns

    r_star = [None if math.isnan(r) else float(r) for r in read_columns(layout.sentence_metrics, ["r_star"])["r_star"]]
    batch.add(crossover_summary, r_star, path("crossover_all_sentences.png"), shown=shown, dpi=dpi)
