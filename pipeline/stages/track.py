"""Stage track: log the pipeline result (params, metrics, figures) as one MLflow run.

Writes reports/mlflow_last_run.json (run id, store URI without password, where each input file is stored: the next
run references the unchanged ones instead of uploading them again; not versioned: it differs per machine) and
the DVC output reports/mlflow_run.json, which holds only what is the same everywhere (whether and
where to the result was logged by experiment name), so that logging a run does not change dvc.lock.

The run's start is the pipeline's, not this stage's (`pipeline_start`), so its duration covers the repro.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
import logging
from pathlib import Path

from pipeline.base.paths import Layout

if TYPE_CHECKING:
    from pipeline.config.schema import Config

log = logging.getLogger("pipeline")


def start_inputs() -> tuple[list[str], list[str]]:
    """The track stage's inputs that stages write (pipeline/registry.py), as (DVC-cached, kept in git): a fresh
    clone has none of the cached ones, so their files were written (or checked out) by this repro; the others
    (metrics, plot data, report) carry the clone's time."""
    from pipeline.registry import BY_NAME, STAGES

    cache = {out.layout: out.cache for stage in STAGES for out in stage.outputs}
    inputs = [name for name in BY_NAME["track"].inputs if name in cache]
    return [name for name in inputs if cache[name]], [name for name in inputs if not cache[name]]


def pipeline_start(layout: Layout, now: float) -> float:
    """When this repro's stages wrote their first output (seconds): the earliest modification time among the
    input files of this stage written after the previous DVC-path run ended (mlflow_last_run.json). Without
    a previous run, only the DVC-cached inputs count (git's files carry the clone's time). An output's time
    is its stage's end, so the first stage that ran is counted from its end; `now` if none is newer."""
    from pipeline.base.files import read_json

    previous = read_json(layout.mlflow_last_run).get("end_time") if layout.mlflow_last_run.exists() else None
    cached, in_git = start_inputs()
    names = cached + (in_git if previous else [])
    since = previous / 1000 if previous else 0.0
    times = []
    for name in names:
        path = getattr(layout, name)
        for file in path.rglob("*") if path.is_dir() else [path]:
            if file.is_file() and since < file.stat().st_mtime <= now:
                times.append(file.stat().st_mtime)
    return min(times, default=now)


def run(params: Config, layout: Layout, root: Path) -> dict:
    import time
    from dataclasses import asdict

    from pipeline.base.files import read_json, write_json
    from pipeline.outputs.tracking import check_reachable, log_result, runs_page, without_credentials
    from pipeline.registry import logged_outputs

    if not params.tracking.enabled:
        record = {"enabled": False}
    else:
        check_reachable(params.tracking.uri, root)
        start = pipeline_start(layout, time.time())
        # the previous run's record: its unchanged input files are referenced, not uploaded again
        previous = read_json(layout.mlflow_last_run) if layout.mlflow_last_run.exists() else None
        record = {
            "enabled": True,
            **log_result(
                asdict(params),
                layout,
                root,
                artifacts=logged_outputs(),
                extra_tags={"runner": "dvc"},
                start_time=int(start * 1000),
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


if __name__ == "__main__":
    from pipeline.stages._cli import stage_main

    stage_main("track", run)
