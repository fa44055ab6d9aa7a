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
from pipeline.length.train import RunSpec

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
) -> list[tuple[dict, dict]]:
    """(result, cost) of every run of `cfg`, from the run store (default: the project's, length_run_store) or trained
    into it."""
    from pipeline.base.paths import length_run_store
    from pipeline.core.device import resolve_device

    device = resolve_device(cfg.device, key="length.device")
    return compute(plan(cfg), store or length_run_store(root), device, processes or workers(cfg))


def write_results(results: list[dict], experiment: dict, out: Path, dpi: int = 110) -> list[Path]:
    """The results folder's files (module doc) for `results` (every run's result) in `out`; returns their paths."""
    from pipeline.base.files import write_columns, write_json
    from pipeline.length.figure import FIGURE, draw
    from pipeline.length.summary import by_length, by_seed, summarize

    out.mkdir(parents=True, exist_ok=True)
    summary = summarize(results, experiment, experiment["symbols"], experiment["bucket"])
    write_json(out / SUMMARY, summary)
    write_columns(out / BY_LENGTH, by_length(results, experiment["train_length"]))
    write_columns(out / BY_SEED, by_seed(results))
    draw(results, experiment["train_length"], experiment["symbols"], out / FIGURE, dpi)
    return [out / SUMMARY, out / BY_LENGTH, out / BY_SEED, out / FIGURE]


def log_costs(runs: list[RunSpec], computed: list[tuple[dict, dict]]) -> None:
    """One line: what training cost (the runs' CPU seconds, as measured when each was trained)."""
    costs = [cost for _, cost in computed]
    cpu = sum(c["cpu_seconds"] for c in costs)
    steps = sum(run.steps for run in runs)
    log.info(
        "length: %d runs, %.0f CPU-s of training and evaluation (%.1f ms a step)", len(runs), cpu, 1e3 * cpu / steps
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

    runs = plan(cfg)
    computed = train_runs(cfg, root, store=store)
    log_costs(runs, computed)
    results = [result for result, _ in computed]
    files = write_results(results, settings(cfg), out)
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
