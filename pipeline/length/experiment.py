"""The whole experiment for one length config: the runs (from the store or trained), the results folder, MLflow.

    results/summary.json              per task, family, metric and length bucket: mean, std, min, max over seeds
                                      (gated by `python -m pipeline.gate` as `length.*`)
    results/accuracy_by_length.csv    the same statistics at every test length
    results/accuracy_by_seed.csv      every run's accuracy at every test length
    results/length_generalisation.png the figure (pipeline.length.figure)

The DVC stage (pipeline.stages.length) writes them to experiments/length/results/; the Hydra app to its run's folder,
and a multirun's jobs train their share of the grid, which the sweep's end gathers into one results folder.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from pipeline.length.runs import compute, plan

log = logging.getLogger("pipeline")

SUMMARY, BY_LENGTH, BY_SEED = "summary.json", "accuracy_by_length.csv", "accuracy_by_seed.csv"
GRID = ("tasks", "families", "seeds")  # what a multirun may split between its jobs; the rest must agree to gather


def settings(cfg: Any) -> dict[str, Any]:
    """summary.json's echo of the length config `cfg`: what the numbers are numbers of (device and workers left out:
    they change how, not what, is computed)."""
    from dataclasses import asdict

    echo = {k: v for k, v in asdict(cfg).items() if k not in ("name", "device", "workers")}
    return {**echo, "test_length": cfg.test_factor * cfg.train_length}


def workers(cfg: Any) -> int:
    """Runs trained at once on the CPU: length.workers, or one per usable core."""
    from pipeline.base.worker_pool import usable_cores

    return cfg.workers or usable_cores()


def train_runs(
    cfg: Any, root: Path, processes: int | None = None, store: Path | None = None
) -> tuple[list[tuple[dict, dict]], dict]:
    """(result, cost) of every run of `cfg` and of its RoPE runs' test-time extensions, from the run store (default:
    the project's, length_run_store) or trained into it, and the settings chosen per (task, family) by the
    learning-rate search (its runs first, pipeline.length.runs.search)."""
    from pipeline.base.paths import length_run_store
    from pipeline.core.device import resolve_device
    from pipeline.length.runs import choose, search

    device = resolve_device(cfg.device, key="length.device")
    store, processes = store or length_run_store(root), processes or workers(cfg)
    searched = compute(search(cfg), store, device, processes)
    chosen = choose([result for result, _ in searched])
    extensions = tuple((s, float(f)) for s in cfg.rope.extend for f in cfg.rope.extend_factors)
    computed = compute(plan(cfg, chosen), store, device, processes, extensions)
    log_costs(searched + computed)
    return computed, chosen


def write_results(
    results: list[dict], experiment: dict, out: Path, dpi: int = 110, chosen: dict | None = None
) -> list[Path]:
    """The results folder's files (module doc) for `results` (every run's result) in `out`; returns their paths."""
    from pipeline.base.files import write_columns, write_json
    from pipeline.length.figure import FIGURE, draw
    from pipeline.length.summary import by_length, by_seed, summarize

    out.mkdir(parents=True, exist_ok=True)
    summary = summarize(results, experiment, experiment["symbols"], experiment["bucket"], chosen or {})
    write_json(out / SUMMARY, summary)
    write_columns(out / BY_LENGTH, by_length(results, experiment["train_length"]))
    write_columns(out / BY_SEED, by_seed(results))
    draw(results, experiment["train_length"], experiment["symbols"], out / FIGURE, dpi)
    return [out / SUMMARY, out / BY_LENGTH, out / BY_SEED, out / FIGURE]


def log_costs(computed: list[tuple[dict, dict]]) -> None:
    """One line: what training cost (the runs' CPU seconds, as measured when each was trained)."""
    cpu = sum(cost["cpu_seconds"] for _, cost in computed)
    steps = sum(result["steps"] for result, cost in computed if cost["cpu_seconds"]) or 1
    log.info(
        "length: %d runs, %.0f CPU-s of training and evaluation (%.1f ms a step)", len(computed), cpu, 1e3 * cpu / steps
    )


def description(summary: dict) -> str:
    """The tables of every task (the MLflow parent run's description, the log)."""
    from pipeline.length.summary import table

    return "\n\n".join(table(summary, task) for task in summary["tasks"])


def run_experiment(
    cfg: Any,
    tracking: Any,
    out: Path,
    root: Path,
    *,
    run_name: str,
    parent_run_id: str | None = None,
    extra_tags: dict[str, str] | None = None,
    store: Path | None = None,
) -> dict:
    """The whole experiment of the length config `cfg` (runs from `store`, default the project's run store; results
    in `out`; MLflow when tracking.enabled); returns the summary."""
    from dataclasses import asdict

    from pipeline.base.files import read_json

    computed, chosen = train_runs(cfg, root, store=store)
    results = [result for result, _ in computed]
    files = write_results(results, settings(cfg), out, chosen=chosen)
    summary = read_json(files[0])
    for line in description(summary).splitlines():
        log.info("%s", line)
    if tracking.enabled:
        from pipeline.length.tracking import log_experiment

        config = {"length": asdict(cfg), "tracking": asdict(tracking)}
        record = log_experiment(
            config,
            tracking,
            summary,
            results,
            files,
            root,
            run_name=run_name,
            parent_run_id=parent_run_id,
            extra_tags=extra_tags,
            description=description(summary),
        )
        log.info("mlflow: length experiment run %s, one run per family under it", record["parent_run_id"])
    return summary
