"""A multirun of `python -m pipeline.length`: the callback that conf/length_experiment.yaml names.

It is the pipeline's MultirunParentRun (one MLflow parent run per sweep, opened at its start; the per-job table and
the failed jobs at its end; exit 1 when a job failed) plus the gathering: each finished job's record
(<job>/job_result.json) holds its runs' results and its settings (the length config without its grid: tasks, families,
seeds); the jobs of one setting are gathered into <sweep dir>/results/ (results-<digest>/ each when the sweep varied
a setting), with one MLflow run per family under the sweep's parent run.
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path

from pipeline.outputs.parent_run import MultirunParentRun

log = logging.getLogger("pipeline")


def gather(jobs: list[dict]) -> dict[str, tuple[dict, list[dict], dict]]:
    """{folder name: (settings, the results of its jobs' runs, their learning-rate searches)}, one entry per distinct
    setting (without the grid) of the finished jobs; a run that two jobs trained (overlapping grids) counts once."""
    from pipeline.length.experiment import GRID

    groups: dict[str, tuple[dict, dict, dict]] = {}
    for job in jobs:
        if job.get("status") != "finished" or "results" not in job:
            continue
        setting = {k: v for k, v in job["settings"].items() if k not in GRID}
        digest = hashlib.sha256(json.dumps(setting, sort_keys=True).encode()).hexdigest()[:8]
        _, runs, searched = groups.setdefault(digest, (job["settings"], {}, {}))
        for task, families in job.get("search", {}).items():
            searched.setdefault(task, {}).update(families)
        for result in job["results"]:
            runs.setdefault((result["task"], result["family"], result["seed"]), result)
    named = {}
    for digest, (setting, runs, searched) in groups.items():
        ordered = [runs[key] for key in sorted(runs, key=_grid_order(runs))]
        grid = {
            "tasks": list(dict.fromkeys(r["task"] for r in ordered)),
            "families": list(dict.fromkeys(r["family"] for r in ordered)),
            "seeds": sorted({r["seed"] for r in ordered}),
        }
        named["results" if len(groups) == 1 else f"results-{digest}"] = ({**setting, **grid}, ordered, searched)
    return named


def _grid_order(runs: dict):
    """Runs ordered task, family, seed, as a config lists them (pipeline.length.runs.plan): tasks and families in
    the choice lists' order."""
    from pipeline.core.choices import LENGTH_FAMILIES, LENGTH_TASKS

    order = lambda family: LENGTH_FAMILIES.index(family) if family in LENGTH_FAMILIES else len(LENGTH_FAMILIES)  # noqa: E731
    return lambda key: (LENGTH_TASKS.index(key[0]), order(key[1]), key[1], key[2])


class LengthSweep(MultirunParentRun):
    def on_multirun_end(self, config, **kwargs) -> None:
        from omegaconf import OmegaConf

        from pipeline.base.errors import PipelineError
        from pipeline.base.paths import project_root
        from pipeline.length.experiment import description, write_results
        from pipeline.outputs.multirun import collect_jobs, read_sweep

        sweep_dir = Path(config.hydra.sweep.dir).resolve()
        sweep = read_sweep(sweep_dir)
        if sweep is not None:
            tracking = OmegaConf.to_object(config.tracking)
            for folder, (setting, results, searched) in gather(collect_jobs(sweep_dir, sweep["sweep_id"])).items():
                files = write_results(results, setting, sweep_dir / folder, chosen=searched)
                log.info("length: %d runs gathered into %s", len(results), sweep_dir / folder)
                if self._open is None:
                    continue
                from pipeline.base.files import read_json
                from pipeline.length.tracking import log_experiment

                summary = read_json(files[0])
                try:
                    log_experiment(
                        {"length": setting},
                        tracking,
                        summary,
                        results,
                        files,
                        project_root(),
                        run_name=f"{folder} of sweep {' '.join(sweep['overrides'])}",
                        parent_run_id=self._open[1],
                        extra_tags={"runner": "hydra", "sweep_dir": str(sweep_dir)},
                        description=description(summary),
                    )
                except PipelineError as exc:  # the server stopped answering: the parent's end says so too
                    log.error("%s", exc)
        super().on_multirun_end(config, **kwargs)
