"""The experiment's figures (matplotlib, Agg; pipeline.figures.drawing.save writes reproducible PNG bytes).

length_generalisation.png    accuracy against test length, one panel per metric (rows) and task (columns):
                             one line per family (the mean over seeds) in a band from the seeds' min to max,
                             the training range shaded, chance dashed; RoPE's test-time extensions dashed (2x)
                             and dotted (3x); a family some of whose seeds missed the criterion says so in the legend
length_<family>.png          the same for one family (its MLflow run's figure: `draw` of its results)
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from pipeline.core.choices import LENGTH_FAMILIES  # noqa: E402
from pipeline.length.summary import METRICS, accuracies, grouped  # noqa: E402
from pipeline.figures.drawing import save  # noqa: E402

FIGURE = "length_generalisation.png"
# one colour per family, whatever families a config compares (matplotlib's tab10, colour-blind distinguishable)
COLOURS = dict(zip(LENGTH_FAMILIES, ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown")))
COLOURS |= {"rope_pi": "tab:olive", "rope_ntk": "tab:cyan", "rope_yarn": "tab:pink"}


def style(family: str) -> tuple[str, str]:
    """(colour, line style) of a family: rope_<scaling>_<s>x takes its scaling's colour, dashed for s = 2, dotted
    beyond."""
    base, _, factor = family.rpartition("_") if family.startswith("rope_") else (family, "", "")
    return COLOURS.get(base, "tab:gray"), ("-" if not factor else "--" if factor == "2x" else ":")


def legend_label(family: str, by_task: dict[str, dict[str, list[dict]]]) -> str:
    """The family's name and, for each task where some seed missed the criterion, how many seeds reached it."""
    counts = {task: [run["converged"] for run in families.get(family, [])] for task, families in by_task.items()}
    missed = [f"{task} {sum(c)}/{len(c)}" for task, c in counts.items() if not all(c)]
    return f"{family} (converged: {', '.join(missed)})" if missed else family


LABELS = {"token_accuracy": "per-token accuracy", "sequence_accuracy": "exact-sequence accuracy"}


def _axes(tasks: list[str], title: str):
    fig, axes = plt.subplots(
        len(METRICS), len(tasks), figsize=(5.2 * len(tasks), 3.4 * len(METRICS)), squeeze=False, layout="constrained"
    )
    fig.suptitle(title)
    return fig, axes


def _frame(ax, metric: str, task: str, train_length: int, test_length: int, chance: float | None) -> None:
    ax.axvspan(0.5, train_length + 0.5, color="0.88", zorder=0, label=f"trained: 1-{train_length}")
    if chance is not None:
        ax.axhline(chance, color="0.4", linestyle="--", linewidth=1, label=f"chance ({chance:.2g})")
    ax.set_xlim(0.5, test_length + 0.5)
    ax.set_ylim(-0.02, 1.02)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("test length (symbols)")
    ax.set_ylabel(LABELS[metric])
    ax.set_title(f"{task}: {LABELS[metric]}")
    ax.grid(alpha=0.3)


def draw(results: list[dict], train_length: int, symbols: int, path: Path, dpi: int = 110) -> Path:
    """length_generalisation.png of every run's result (see the module doc)."""
    by_task = grouped(results)
    tasks = list(by_task)
    first = next(iter(next(iter(by_task.values())).values()))
    seeds = len(first)
    lengths = np.asarray(first[0]["lengths"])
    title = (
        f"Trained on lengths 1-{train_length}, tested to {lengths[-1]}: mean over {seeds} seed"
        f"{'s (band: min to max)' if seeds > 1 else ''}"
    )
    fig, axes = _axes(tasks, title)
    for col, task in enumerate(tasks):
        for row, metric in enumerate(METRICS):
            ax = axes[row, col]
            _frame(ax, metric, task, train_length, int(lengths[-1]), 1.0 / symbols if metric == METRICS[0] else None)
            for family, runs in by_task[task].items():
                values = np.array([accuracies(run)[metric] for run in runs])  # (seeds, lengths)
                colour, line = style(family)
                if len(runs) > 1:
                    ax.fill_between(lengths, values.min(axis=0), values.max(axis=0), color=colour, alpha=0.15, lw=0)
                ax.plot(
                    lengths, values.mean(axis=0), line, color=colour, linewidth=1.6, label=legend_label(family, by_task)
                )
    _legend(fig, axes[0, 0])
    save(fig, path, dpi)
    return path


def _legend(fig, ax) -> None:
    """One legend for every panel below them (outside the data): in one row where it fits the figure's width, else
    in as many rows as it needs."""
    handles, labels = ax.get_legend_handles_labels()
    for ncols in range(len(labels), 0, -1):
        legend = fig.legend(handles, labels, loc="outside lower center", ncols=ncols, fontsize="small", frameon=False)
        if ncols == 1 or legend.get_window_extent(fig.canvas.get_renderer()).width <= fig.bbox.width:
            return
        legend.remove()
