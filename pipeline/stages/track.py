"""Stage track: log the pipeline result (params, metrics, figures) as one MLflow run; record it in
reports/mlflow_run.json."""
from __future__ import annotations

import logging
from pathlib import Path

from pipeline.paths import Layout

log = logging.getLogger("pipeline")


def run(params: dict, layout: Layout, root: Path) -> dict:
    from pipeline.files import write_json
    from pipeline.tracking import log_result

    if not params["tracking"]["enabled"]:
        record = {"enabled": False}
    else:
        record = {"enabled": True, **log_result(params, layout.base, root, extra_tags={"runner": "dvc"})}
        log.info("mlflow: run %s in %s (browse: see README, `mlflow ui`)", record["run_id"], record["tracking_uri"])
    write_json(layout.mlflow_run, record)
    return record


if __name__ == "__main__":
    from pipeline.stages._cli import stage_main

    stage_main("track", run)
