"""The experiment's numbers: accuracy per task, family and test length, with its spread over seeds.

Two accuracies, both from the runs' counts (pipeline.length.train.evaluate), so each is an exact ratio:

    token_accuracy     answer tokens right / answer tokens            (per-token, teacher-forced)
    sequence_accuracy  answers entirely right / answers               (exact sequence = greedy decoding's exact match)

Lengths are reported one by one (the CSVs) and in buckets (summary.json, the gated file, and the documented tables): the
training range 1 .. L, then every `width` lengths up to k L. A seed's bucket value is the mean over the bucket's
lengths of its accuracy at each length; the spread over seeds is their mean, sample standard deviation (0 for one
seed), min and max. Each family also says how its runs trained (`training`: the learning rate the search chose, the
seeds that reached the criterion, the steps) and which cells hold by construction (`by_construction`: the learned
table's rows beyond the trained positions are never trained, so every longer string reads untrained rows).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Iterable, NamedTuple

import numpy as np

METRICS = ("token_accuracy", "sequence_accuracy")
UNTRAINED_ROWS = (
    "rows 2L .. of the learned table are never trained (weight decay only shrinks them): a string longer than L reads "
    "untrained rows, so this cell fails by construction"
)


class Bucket(NamedTuple):
    name: str  # "21-30"
    first: int
    last: int
    trained: bool  # inside the training range


def buckets(train_length: int, test_length: int, width: int | None = None) -> list[Bucket]:
    """1 .. L, then `width` lengths at a time (default L) up to test_length (the last one may be shorter)."""
    width = width or train_length
    out = [Bucket(f"1-{train_length}", 1, train_length, True)]
    for first in range(train_length + 1, test_length + 1, width):
        last = min(first + width - 1, test_length)
        out.append(Bucket(f"{first}-{last}", first, last, False))
    return out


def accuracies(result: dict) -> dict[str, np.ndarray]:
    """{metric: (lengths,) float64} of one run's result: its counts over the tokens and answers evaluated."""
    lengths = np.asarray(result["lengths"], dtype=np.float64)
    batch = result["eval_batch"]
    return {
        "token_accuracy": np.asarray(result["token_correct"], dtype=np.float64) / (lengths * batch),
        "sequence_accuracy": np.asarray(result["sequence_correct"], dtype=np.float64) / batch,
    }


def stats(values: np.ndarray) -> dict[str, float]:
    """mean, sample std (0 for one value), min and max of (seeds,) values."""
    values = np.asarray(values, dtype=np.float64)
    std = float(np.std(values, ddof=1)) if values.size > 1 else 0.0
    return {"mean": float(np.mean(values)), "std": std, "min": float(values.min()), "max": float(values.max())}


def grouped(results: Iterable[dict]) -> dict[str, dict[str, list[dict]]]:
    """task -> family -> the results of its seeds (in the order given)."""
    out: dict[str, dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for result in results:
        out[result["task"]][result["family"]].append(result)
    return {task: dict(families) for task, families in out.items()}


def summarize(
    results: list[dict], experiment: dict, symbols: int, width: int | None = None, chosen: dict | None = None
) -> dict[str, Any]:
    """summary.json: the experiment's settings (`experiment`, echoed), chance, the buckets, the learning-rate search
    (`chosen`, pipeline.length.runs.choose), and per task, family, metric and bucket the spread over seeds, with the
    family's training and its by-construction cells (module doc)."""
    first = results[0]
    train_length, test_length = experiment["train_length"], first["lengths"][-1]
    spans = buckets(train_length, test_length, width)
    tasks: dict[str, Any] = {}
    for task, families in grouped(results).items():
        tasks[task] = {}
        for family, runs in families.items():
            per_seed = [accuracies(run) for run in runs]
            tasks[task][family] = {
                metric: {
                    b.name: stats(np.array([float(np.mean(acc[metric][b.first - 1 : b.last])) for acc in per_seed]))
                    for b in spans
                }
                for metric in METRICS
            }
            tasks[task][family]["training"] = {
                "lr": runs[0]["lr"],
                "converged": sum(run["converged"] for run in runs),
                "runs": len(runs),
                "steps": stats(np.array([run["steps"] for run in runs], dtype=np.float64)),
            }
            if family == "learned":
                tasks[task][family]["by_construction"] = {b.name: UNTRAINED_ROWS for b in spans if not b.trained}
    return {
        "experiment": experiment,
        "chance": {"token_accuracy": 1.0 / symbols},
        "buckets": {b.name: [b.first, b.last] for b in spans},
        "search": chosen or {},
        "tasks": tasks,
    }


def by_length(results: list[dict], train_length: int) -> dict[str, list]:
    """Columns of accuracy_by_length.csv: task, family, length, trained (1 inside 1 .. L), then each metric's mean,
    std, min and max over seeds."""
    columns: dict[str, list] = defaultdict(list)
    for task, families in grouped(results).items():
        for family, runs in families.items():
            per_seed = [accuracies(run) for run in runs]
            for i, length in enumerate(runs[0]["lengths"]):
                columns["task"].append(task)
                columns["family"].append(family)
                columns["length"].append(length)
                columns["trained"].append(int(length <= train_length))
                for metric in METRICS:
                    for name, value in stats(np.array([acc[metric][i] for acc in per_seed])).items():
                        columns[f"{metric}_{name}"].append(value)
    return dict(columns)


def by_seed(results: list[dict]) -> dict[str, list]:
    """Columns of accuracy_by_seed.csv: task, family, seed, length, then each metric (every run's own numbers)."""
    columns: dict[str, list] = defaultdict(list)
    for run in results:
        acc = accuracies(run)
        for i, length in enumerate(run["lengths"]):
            columns["task"].append(run["task"])
            columns["family"].append(run["family"])
            columns["seed"].append(run["seed"])
            columns["length"].append(length)
            for metric in METRICS:
                columns[metric].append(float(acc[metric][i]))
    return dict(columns)


def table(summary: dict, task: str, metric: str = "token_accuracy") -> str:
    """The documented table (docs/length-experiment.md): one row per family, one column per bucket, `mean ± std
    (min-max)` over seeds (one seed: its value); the family says its learning rate and, where some seed missed the
    criterion, "not converged" with how many did; a cell that fails by construction says so."""
    names = list(summary["buckets"])
    seeds = len(summary["experiment"]["seeds"])
    header = (
        f"| {task}: {metric.replace('_', ' ')} ({seeds} seed{'s' if seeds > 1 else ''}) | " + " | ".join(names) + " |"
    )
    lines = [header, "|---" * (len(names) + 1) + "|"]
    for family, metrics in summary["tasks"][task].items():
        t, marks = metrics["training"], metrics.get("by_construction", {})
        state = "" if t["converged"] == t["runs"] else f", **not converged** ({t['converged']}/{t['runs']})"
        cells = [
            f"{s['mean']:.3f}"
            + (f" ± {s['std']:.3f} ({s['min']:.2f}-{s['max']:.2f})" if seeds > 1 else "")
            + (" by construction" if name in marks else "")
            for name, s in ((name, metrics[metric][name]) for name in names)
        ]
        lines.append(f"| {family} (lr {t['lr']:g}{state}) | " + " | ".join(cells) + " |")
    return "\n".join(lines)
