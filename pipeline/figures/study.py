"""The crossover study's figure (reports/study/crossover_study.png): r* by sentence length, one box per GloVe
dimension, the Transformer's r = 1/sqrt(d) marked."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from matplotlib.cbook import boxplot_stats

from pipeline.figures.drawing import log10_values, log_axis, plt, save

COLOURS = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown")


def crossover_study(rows: list[dict], summary: dict, path: Path, *, dpi: int = 110) -> None:
    """rows: one per (d, sentence) as pipeline.core.study.summarize takes them; summary: its result.

    x: the random sentences' lengths (then the texts file's sentences); y: r* on a log axis; per d a box
    (quartiles, whiskers over the whole range) and a dashed line at 1/sqrt(d): below the line, position has
    already won at the Transformer's scaling. Sentences whose curves never cross on the grid are left out
    (their count is in the legend).

    Longer than 60 lines because it draws one figure top to bottom, a sequence of matplotlib calls.
    """
    dims = sorted({row["d"] for row in rows})
    lengths = sorted({row["length"] for row in rows if not row["from_file"]})
    has_file = any(row["from_file"] for row in rows)
    groups = [str(n) for n in lengths] + (["texts file"] if has_file else [])
    width = 0.8 / max(1, len(dims))
    fig, ax = plt.subplots(figsize=(max(6.0, 1.2 * len(groups) + 3), 4.8), layout="constrained")
    for i, d in enumerate(dims):
        colour = COLOURS[i % len(COLOURS)]
        stats = summary[f"d{d}"]
        data = []
        for group in groups:
            selected = [
                row
                for row in rows
                if row["d"] == d
                and row["r_star"] is not None
                and (
                    row["from_file"] if group == "texts file" else not row["from_file"] and str(row["length"]) == group
                )
            ]
            data.append(np.array([row["r_star"] for row in selected], dtype=np.float64))
        positions = np.arange(len(groups)) + (i - (len(dims) - 1) / 2) * width
        filled = [j for j, values in enumerate(data) if len(values)]
        if filled:
            # the box statistics of r* itself (quartiles interpolated in r), drawn on the log10 axis
            stats_boxes = boxplot_stats([data[j] for j in filled], whis=(0, 100))
            for box in stats_boxes:
                for key in ("med", "q1", "q3", "whislo", "whishi", "mean"):
                    box[key] = float(log10_values(box[key]))
                box["fliers"] = log10_values(box["fliers"]) if len(box["fliers"]) else box["fliers"]
            ax.bxp(
                stats_boxes,
                positions=positions[filled],
                widths=width * 0.85,
                patch_artist=True,
                boxprops={"facecolor": colour, "alpha": 0.45},
                medianprops={"color": "black"},
                manage_ticks=False,
            )
        share = stats["random"]["sqrt_d_semantic_share"]
        beyond = stats["random"]["beyond_grid"] + stats["file"]["beyond_grid"]
        label = (
            f"d = {d}: r = 1/sqrt(d) = {stats['sqrt_d_ratio']:.3g}"
            + (f", meaning wins there for {share:.0%}" if share is not None else "")
            + (f" ({beyond} never cross)" if beyond else "")
        )
        ax.axhline(log10_values(stats["sqrt_d_ratio"]), color=colour, linestyle="--", linewidth=1.5, label=label)
    shown = [float(log10_values(r["r_star"])) for r in rows if r["r_star"] is not None]
    shown += [float(log10_values(summary[f"d{d}"]["sqrt_d_ratio"])) for d in dims]
    pad = 0.05 * (max(shown) - min(shown) or 1.0)  # the lines at 1/sqrt(d) inside the frame, not on its edge
    ax.set_ylim(min(shown) - pad, max(shown) + pad)
    log_axis(ax.yaxis, plain=True, subs=(2, 3, 5))
    ax.set_xticks(np.arange(len(groups)), groups)
    ax.set_xlabel("words per sentence (random sentences)" + (", then the texts file's sentences" if has_file else ""))
    ax.set_ylabel("exact crossover r* = W2 / W1")
    ax.set_title("Where positional neighbours overtake semantic ones, by length and d")
    ax.legend(loc="best", fontsize=8)
    ax.grid(True, axis="y", which="both", alpha=0.3)
    save(fig, path, dpi)
