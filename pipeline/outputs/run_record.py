"""The MLflow run of a DVC repro's result and its records, logged by the figures stage (pipeline/stages/figures.py):
the config as params, the metrics, the outputs the registry declares with `log` and the inputs
(pipeline.outputs.tracking.log_result).

The records: reports/mlflow_last_run.json (run id, store URI without password, where each input file is stored: the
next run references the unchanged ones instead of uploading them again; not versioned: it differs per machine) and
the DVC output reports/mlflow_run.json, which holds only what is the same everywhere (whether and where to the result
was logged by experiment name), so that logging a run does not change dvc.lock. The run's start is the pipeline's,
not the stage's (`pipeline_start`), so its duration covers the repro.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

from pipeline.base.paths import Layout

if TYPE_CHECKING:
    from pipeline.config.schema import Config

log = logging.getLogger("pipeline")


def pipeline_start(layout: Layout, now: float, inputs: tuple[list[str], list[str]], not_before: float = 0.0) -> float:
    """When this repro's stages wrote their first output (seconds): the earliest modification time among `inputs`
    (the logging stage's inputs that stages write, as Layout names: (DVC-cached, kept in git)) written after the
    previous DVC-path run ended (mlflow_last_run.json) and not before `not_before` (when the dvc command running the
    stage started: `dvc_started`). Without a previous run, only the DVC-cached inputs count (git's files carry the
    clone's time), and `not_before` keeps out those a queued experiment's copy got from the cache, which carry the
    times of the run that made them. An output's time is its stage's end, so the first stage that ran is counted from
    its end; `now` (the logging stage's start) if none is newer."""
    from pipeline.base.files import read_json

    previous = read_json(layout.mlflow_last_run).get("end_time") if layout.mlflow_last_run.exists() else None
    cached, in_git = inputs
    names = cached + (in_git if previous else [])
    since = max(previous / 1000 if previous else 0.0, not_before)
    times = []
    for name in names:
        path = getattr(layout, name)
        for file in path.rglob("*") if path.is_dir() else [path]:
            if file.is_file() and since < (mtime := file.stat().st_mtime) <= now:
                times.append(mtime)
    return min(times, default=now)


def dvc_started() -> float:
    """When the nearest `dvc` process above this one started (`dvc repro`, `dvc exp run`, a queued experiment's
    `dvc exp exec-run`), in seconds; 0 when the stage does not run under DVC."""
    import psutil

    for parent in psutil.Process().parents():
        try:
            if any(part == "dvc" or part.endswith("/dvc") or "dvc.cli" in part for part in parent.cmdline()):
                return parent.create_time()  # `dvc ...`, `python -m dvc ...`, pipeline.repro's dvc child
        except psutil.Error:
            continue
    return 0.0


def log_run(
    params: Config,
    layout: Layout,
    root: Path,
    started: float,
    artifacts: tuple[tuple[str, str], ...],
    inputs: tuple[list[str], list[str]],
) -> dict:
    """Log the result as one MLflow run (unless tracking is disabled), then write its records. started: the logging
    stage's start; artifacts: the outputs to log (pipeline.stages.registry.logged_outputs); inputs: as
    `pipeline_start` takes them."""
    from dataclasses import asdict

    from pipeline.base.files import read_json, write_json

    if not params.tracking.enabled:
        record = {"enabled": False}
    else:
        from pipeline.config.params import differences
        from pipeline.outputs.tracking import default_run_name, log_result, runs_page, without_credentials

        # the previous run's record: its unchanged input files are referenced, not uploaded again
        previous = read_json(layout.mlflow_last_run) if layout.mlflow_last_run.exists() else None
        config = asdict(params)
        record = {
            "enabled": True,
            **log_result(
                config,
                layout,
                root,
                artifacts=artifacts,
                # named by what differs from conf/'s defaults (MLflow's runs table shows ~40 characters of it)
                run_name=default_run_name(config, os.environ.get("DVC_EXP_NAME"), differences(config, root)),
                extra_tags={"runner": "dvc"},
                start_time=int(pipeline_start(layout, started, inputs, dvc_started()) * 1000),
                previous=previous,
            ),
        }
        uri = record["tracking_uri"]
        # the URI as logged is redacted (no password); the link has no user info; a local store has no server
        # (and so no port) yet: the server command prints the link with its port
        browse = (
            runs_page(without_credentials(uri), record["experiment_id"])
            if uri.startswith(("http://", "https://"))
            else "python -m pipeline.server (it prints the link to the runs)"
        )
        log.info("mlflow: run %s in %s; browse: %s", record["run_id"], uri, browse)
    write_json(layout.mlflow_last_run, record)
    write_json(layout.mlflow_run, {"logged": params.tracking.enabled, "experiment": params.tracking.experiment})
    return record
