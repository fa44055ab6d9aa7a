"""Stage length (experiments/length/dvc.yaml, the length experiment's own DVC project): train short, test long.

Trains one tiny causal transformer per task, position family and seed of `length` (or reads it from the run store,
pipeline.length.runs: a run a killed stage left half-trained resumes from its checkpoint), evaluates every one at
every test length, and writes experiments/length/results/ (replaced whole): summary.json (gated), the two CSVs and
the figure (pipeline.length.experiment). Logs one MLflow parent run with a run per family (tracking).

Reads params (experiments/length/params.yaml): length, tracking.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from pipeline.base.paths import Layout

if TYPE_CHECKING:
    from pipeline.config.schema import LengthExperimentConfig


def check(cfg: LengthExperimentConfig, root: Path) -> None:
    """What the stage checks before it trains: the limits (time and memory estimates) and the MLflow store."""
    from pipeline.config.limits import check_length
    from pipeline.core.device import resolve_device
    from pipeline.length.experiment import workers

    on_cpu = resolve_device(cfg.length.device, key="length.device").type == "cpu"
    check_length(cfg.length, workers(cfg.length), on_cpu=on_cpu)
    if cfg.tracking.enabled:
        from pipeline.outputs.tracking import check_reachable

        check_reachable(cfg.tracking.uri, root)


def run(cfg: LengthExperimentConfig, layout: Layout, root: Path) -> dict:
    import os

    from pipeline.base.files import replace_dir
    from pipeline.length.experiment import run_experiment

    summary = {}
    name = os.environ.get("DVC_EXP_NAME") or f"length {cfg.length.name}"

    def build(folder: Path) -> None:
        summary.update(
            run_experiment(cfg.length, cfg.tracking, folder, root, run_name=name, extra_tags={"runner": "dvc"})
        )

    replace_dir(layout.length_results, build)
    return summary


if __name__ == "__main__":
    from pipeline.config.schema import LENGTH
    from pipeline.stages._cli import stage_main

    stage_main("length", run, check=check, composition=LENGTH)
