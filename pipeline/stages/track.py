"""Stage track: log the pipeline result (params, metrics, figures) as one MLflow run.

Writes reports/mlflow_last_run.json (run id, store URI; not versioned: it differs per machine) and
the DVC output reports/mlflow_run.json, which holds only what is the same everywhere (whether and
where to the result was logged by experiment name), so that logging a run does not change dvc.lock.
"""
from __future__ import annotations

import logging
from pathlib import Path

from pipeline.base.paths import Layout

log = logging.getLogger("pipeline")


def run(params: dict, layout: Layout, root: Path) -> dict:
    from pipeline.base.files import write_json
    from pipeline.outputs.tracking import check_reachable, log_result

    tracking = params["tracking"]
    if not tracking["enabled"]:
        record = {"enabled": False}
    else:
        check_reachable(tracking, root)
        record = {"enabled": True, **log_result(params, layout, root, extra_tags={"runner": "dvc"})}
        log.info("mlflow: run %s in %s (browse: see README, `mlflow ui`)", record["run_id"], record["tracking_uri"])
    write_json(layout.mlflow_last_run, record)
    write_json(layout.mlflow_run, {"logged": tracking["enabled"], "experiment": tracking["experiment"]})
    return record


if __name__ == "__main__":
    from pipeline.stages._cli import stage_main

    stage_main("track", run)
