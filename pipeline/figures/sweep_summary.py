"""The sweep's figure, <sweep dir>/sweep_summary.png: the headline of every finished job against the swept keys.

Drawn from the sweep's summary (pipeline.outputs.multirun.summarize: one row per finished job, the swept keys' values
as given on the command line, the metrics that vary), in the launching process once the jobs have ended.

- One row of panels per plotted metric: r* (the median over the sentences, then each listed sentence's), then the
  other headline numbers that vary but for the encoding's rounding checks, then the families table's property numbers
  that vary; at most MAX_METRICS (every metric is in sweep_summary.csv). When no metric varies, r* is drawn anyway, flat: the sweep does not move it.
- One column per swept numeric key (x: its value; a log axis when every value is positive and they span a factor of
  100 or more); in each panel one line per combination of the other swept keys' values (the legend).
- A sweep whose keys are all categorical (texts, glove, encoding, encoding.layout) gets a point chart: x the first
  key's values, one series of points per combination of the others.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from pipeline.figures.labels import GROUP_COLOURS, OTHER_COLOUR
from pipeline.figures.drawing import clip_label, integer_ticks, literal, log10_values, log_axis, plt, save

MAX_METRICS = 4  # rows of panels
MAX_KEYS = 3  # numeric keys, one column of panels each
MAX_LEGEND = 12  # series named in the legend (the rest are drawn, and counted in its last entry)
WIDE = 100.0  # a numeric key whose values span this factor or more gets a log axis
PROPERTIES = "properties."  # pipeline.outputs.multirun.PROPERTIES (not imported: that module stays free of matplotlib)
# the encoding's property checks, in units of 1e-9: what moves them is float rounding, not the swept keys (in the CSV)
ROUNDING = ("pe_norm_dev_1e-9", "pe_offset_spread_1e-9")


def number(value: object) -> float | None:
    """A swept value as given ("100", "1e4", "0.5") as a finite number; None for any other value ("seed", "[1, 2]",
    "true", "nan")."""
    if value is None or isinstance(value, bool):
        return None
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def metric_label(name: str) -> str:
    """The y label of a metric: r* spelled out, the other names as in headline.json and sweep_summary.csv."""
    if name == "r_star.median":
        return "median r* (all sentences)"
    if name.startswith("r_star.s") and name[8:].isdigit():
        return f"r* of sentence {name[8:]}"
    return name


def _order(name: str) -> tuple:
    """r*'s median first, then each sentence's r* by number, then the other headline metrics, then the properties."""
    if name == "r_star.median":
        return (0, 0, name)
    if name.startswith("r_star.s") and name[8:].isdigit():
        return (1, int(name[8:]), name)
    return (3 if name.startswith(PROPERTIES) else 2, 0, "")


def _moves(rows: list[dict], metric: str) -> bool:
    """Whether the jobs that have `metric` give it more than one value (a metric some jobs lack, e.g. the r* of a
    second sentence in a sweep over texts, varies in the table but may hold one value where it exists)."""
    return len({row.get(metric) for row in rows if row.get(metric) is not None}) > 1


def plotted_metrics(summary: dict) -> tuple[list[str], int]:
    """(the metrics the figure draws, how many varying metrics it leaves out)."""
    moving = [metric for metric in summary["varying"] if metric not in ROUNDING and _moves(summary["rows"], metric)]
    varying = sorted(moving, key=_order)  # a stable sort: ties keep the summary's column order
    if not varying:  # nothing moves: show r* flat, which is what the sweep was run for
        varying = sorted((m for m in summary["same"] if m.startswith("r_star.")), key=_order)
    return varying[:MAX_METRICS], max(0, len(varying) - MAX_METRICS)


def _value(row: dict, summary: dict, metric: str) -> float | None:
    value = row.get(metric, summary["same"].get(metric))
    return None if value is None or isinstance(value, bool) else float(value)


def _series(rows: list[dict], keys: list[str]) -> dict[str, list[int]]:
    """{label: the indices of `rows`} of each combination of the values of `keys`, in the order the jobs ran."""
    groups: dict[str, list[int]] = {}
    for i, row in enumerate(rows):
        label = ", ".join(f"{key}={row.get(key)}" for key in keys) or "all jobs"
        groups.setdefault(label, []).append(i)
    return groups


def _style(i: int) -> dict:
    """Series i's colour, and a marker and line that shrink with i: a series drawn over an equal one leaves it in
    sight around its own."""
    colour = GROUP_COLOURS[i % len(GROUP_COLOURS)] if i < 3 * len(GROUP_COLOURS) else OTHER_COLOUR
    return {"color": colour, "markersize": 9 - 2 * (i % 3), "linewidth": 2.6 - 0.8 * (i % 3)}


def _numeric_panel(ax, rows, summary, metric: str, key: str, others: list[str]) -> list:
    xs = [number(row.get(key)) for row in rows]
    log = min(xs) > 0 and max(xs) >= WIDE * min(xs)
    shown = log10_values(xs) if log else np.array(xs, dtype=np.float64)
    handles = []
    for g, (label, members) in enumerate(_series(rows, others).items()):
        points = [(float(shown[i]), _value(rows[i], summary, metric)) for i in members]
        points = sorted((x, y) for x, y in points if y is not None)
        if not points:  # this metric does not exist in these jobs (a sentence their texts lack)
            continue
        (line,) = ax.plot([x for x, _ in points], [y for _, y in points], marker="o", label=literal(label), **_style(g))
        handles.append(line)
    if log:
        log_axis(ax.xaxis)
    elif all(x == round(x) for x in xs):
        integer_ticks(ax.xaxis)
    ax.set_xlabel(literal(key) + (" (log scale)" if log else ""))
    return handles


def _categorical_panel(ax, rows, summary, metric: str, key: str, others: list[str]) -> list:
    categories = list(dict.fromkeys(str(row.get(key)) for row in rows))
    series = _series(rows, others)
    step = min(0.15, 0.8 / max(1, len(series)))
    handles = []
    for g, (label, members) in enumerate(series.items()):
        offset = (g - (len(series) - 1) / 2) * step
        points = [(categories.index(str(rows[i].get(key))) + offset, _value(rows[i], summary, metric)) for i in members]
        points = [(x, y) for x, y in points if y is not None]
        if not points:
            continue
        (dots,) = ax.plot(
            [x for x, _ in points],
            [y for _, y in points],
            linestyle="none",
            marker="o",
            label=literal(label),
            **_style(g),
        )
        handles.append(dots)
    ax.set_xticks(range(len(categories)), [clip_label(c, 20) for c in categories])
    ax.set_xlim(-0.5, len(categories) - 0.5)
    if sum(len(c) for c in categories) > 40:
        ax.tick_params(axis="x", labelrotation=30)
    ax.set_xlabel(literal(key))
    return handles


def _legend(owner, handles: list) -> None:
    """The series' legend, at most MAX_LEGEND entries: right of the figure (one column of panels) or above a
    column's first panel (each column has series of its own)."""
    named = handles[:MAX_LEGEND]
    labels = [h.get_label() for h in named]
    if len(handles) > MAX_LEGEND:
        labels[-1] = f"... and {len(handles) - MAX_LEGEND + 1} more"
    if hasattr(owner, "suptitle"):
        owner.legend(named, labels, loc="outside right upper", fontsize=8)
    else:
        owner.legend(named, labels, loc="lower left", bbox_to_anchor=(0.0, 1.02), fontsize=7, ncols=1)


def draw(summary: dict, path: Path, *, dpi: int = 110) -> Path | None:
    """Draw the figure of `summary` at `path`; None (nothing written) when no job finished or no key was swept."""
    rows, keys = summary["rows"], list(summary["keys"])
    metrics, left_out = plotted_metrics(summary)
    if not rows or not keys or not metrics:
        return None
    numeric = [key for key in keys if all(number(row.get(key)) is not None for row in rows)]
    x_keys = numeric[:MAX_KEYS] or keys[:1]
    panel = _numeric_panel if numeric else _categorical_panel
    fig, axes = plt.subplots(
        len(metrics),
        len(x_keys),
        figsize=(4.4 * len(x_keys) + 3.0, 2.9 * len(metrics) + 0.9),
        layout="constrained",
        squeeze=False,
    )
    for c, key in enumerate(x_keys):
        handles: dict = {}  # the series of this column (the other keys' values), each drawn in one colour
        for r, metric in enumerate(metrics):
            ax = axes[r][c]
            for handle in panel(ax, rows, summary, metric, key, [k for k in keys if k != key]):
                handles.setdefault(handle.get_label(), handle)
            ax.set_ylabel(literal(metric_label(metric)))
            ax.grid(True, alpha=0.3)
        if len(handles) > 1:
            _legend(fig if len(x_keys) == 1 else axes[0][c], list(handles.values()))
    title = f"The headline of {len(rows)} job(s) against the swept key(s)"
    more = [f"{left_out} more metric(s)"] if left_out else []
    more += [f"{len(numeric) - MAX_KEYS} more key(s)"] if len(numeric) > MAX_KEYS else []
    if more:
        title += f"\n({' and '.join(more)} in sweep_summary.csv)"
    fig.suptitle(title)
    save(fig, path, dpi)
    return path
