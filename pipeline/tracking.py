"""MLflow: where runs go, and what one pipeline result logs.

The store is resolved to an absolute location whatever the current directory (Hydra job dirs,
DVC queue temp copies): tracking.uri if set, else $MLFLOW_TRACKING_URI, else
sqlite:///<project root>/mlflow.db with artifacts in <project root>/mlartifacts.
"""
from __future__ import annotations

import json
import logging
import os
import subprocess
from pathlib import Path
from typing import Any

from pipeline.config import flatten
from pipeline.errors import PipelineError
from pipeline.paths import project_root

log = logging.getLogger("pipeline")
PARENT_RUN_FILE = "mlflow_parent_run.json"


def tracking_uri(cfg: dict, root: Path | None = None) -> str:
    uri = cfg.get("uri") or os.environ.get("MLFLOW_TRACKING_URI")
    if uri:
        if uri.startswith("sqlite:///") and not uri.startswith("sqlite:////"):
            # a relative sqlite path would follow the cwd: anchor it at the project root
            uri = "sqlite:///" + str((project_root(root) / uri[len("sqlite:///"):]).resolve())
        return uri
    return f"sqlite:///{project_root(root) / 'mlflow.db'}"


def artifact_location(uri: str, root: Path | None = None) -> str | None:
    """Artifacts beside a local store (not in ./mlruns of the cwd); a server decides its own."""
    if uri.startswith(("sqlite:", "postgresql", "mysql", "mssql")):
        return (project_root(root) / "mlartifacts").as_uri()
    return None


def _client(cfg: dict, root: Path | None):
    import mlflow
    from mlflow.tracking import MlflowClient

    uri = tracking_uri(cfg, root)
    mlflow.set_tracking_uri(uri)
    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name(cfg["experiment"])
    if experiment is None:
        experiment_id = client.create_experiment(cfg["experiment"], artifact_location=artifact_location(uri, root))
    else:
        experiment_id = experiment.experiment_id
    return client, experiment_id, uri


def git_commit(root: Path) -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    return out.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


def _numeric_metrics(metrics: dict) -> dict[str, float]:
    return {k: float(v) for k, v in flatten(metrics).items()
            if isinstance(v, (int, float)) and not isinstance(v, bool)}


def log_result(params: dict, base: Path, root: Path, *, run_name: str | None = None,
               parent_run_id: str | None = None, extra_tags: dict[str, str] | None = None) -> dict[str, Any]:
    """Log one pipeline result (the outputs under `base`) as one MLflow run; returns its ids and URI.

    params: the composed config (flattened into params); metrics: reports/metrics.json; artifacts:
    reports/figures/*.png, reports/metrics.json, reports/plots/*.csv, params, manifests.
    """
    from pipeline.files import read_json

    cfg = params["tracking"]
    client, experiment_id, uri = _client(cfg, root)
    tags = {"git_commit": git_commit(root) or "unknown", "glove": params["glove"]["name"],
            "texts": params["texts"]["name"], **(extra_tags or {})}
    if os.environ.get("DVC_EXP_NAME"):
        tags["dvc_exp_name"] = os.environ["DVC_EXP_NAME"]
    if parent_run_id:
        tags["mlflow.parentRunId"] = parent_run_id
    name = run_name or f"{params['glove']['name']}-{params['texts']['name']}-{params['sweep']['name']}"
    run = client.create_run(experiment_id, run_name=name, tags=tags)
    run_id = run.info.run_id
    try:
        from mlflow.entities import Metric, Param

        flat = {k: json.dumps(v) if isinstance(v, (list, dict)) else str(v) for k, v in flatten(params).items()}
        metrics = read_json(base / "reports" / "metrics.json")
        import time

        now = int(time.time() * 1000)
        client.log_batch(run_id, params=[Param(k, v[:6000]) for k, v in flat.items()],
                         metrics=[Metric(k, v, now, 0) for k, v in _numeric_metrics(metrics).items()])
        reports = base / "reports"
        client.log_artifacts(run_id, str(reports / "figures"), "figures")
        client.log_artifacts(run_id, str(reports / "plots"), "plots")
        client.log_artifact(run_id, str(reports / "metrics.json"))
        for extra in (base / "params.yaml", base / "data" / "glove" / "manifest.json",
                      base / "data" / "tokens" / "tokens.json", base / "data" / "encode" / "encode.json"):
            if extra.exists():
                client.log_artifact(run_id, str(extra), "inputs")
        client.set_terminated(run_id, "FINISHED")
    except BaseException:
        client.set_terminated(run_id, "FAILED")
        raise
    return {"run_id": run_id, "experiment_id": experiment_id, "tracking_uri": uri, "run_name": name}


def check_reachable(cfg: dict, root: Path | None = None) -> None:
    """Fail early, before any computing, when an HTTP tracking server does not answer."""
    uri = tracking_uri(cfg, root)
    if not uri.startswith(("http://", "https://")):
        return
    import urllib.request

    try:
        with urllib.request.urlopen(uri.rstrip("/") + "/health", timeout=10) as response:
            response.read()
    except OSError as exc:
        raise PipelineError(f"MLflow server {uri} does not answer ({exc}): start it (see README, `mlflow server`), "
                            "fix tracking.uri / MLFLOW_TRACKING_URI, or use tracking=disabled.") from None


# ---------------------------------------------------------------- Hydra multirun: one parent run per sweep

def read_parent_run(sweep_dir: Path) -> str | None:
    path = Path(sweep_dir) / PARENT_RUN_FILE
    return json.loads(path.read_text())["run_id"] if path.exists() else None


try:
    from hydra.experimental.callback import Callback
except ImportError:  # hydra not installed: only the DVC stages are used
    Callback = object  # type: ignore[misc,assignment]


class MultirunParentRun(Callback):
    """Hydra callback: opens a parent MLflow run when a multirun starts; jobs log as its children."""

    def on_multirun_start(self, config, **kwargs) -> None:
        from omegaconf import OmegaConf

        tracking = OmegaConf.to_container(config.tracking, resolve=True)
        if not tracking["enabled"]:
            return
        root = project_root()
        client, experiment_id, uri = _client(tracking, root)
        overrides = list(config.hydra.overrides.task)
        run = client.create_run(experiment_id, run_name="sweep: " + " ".join(overrides),
                                tags={"sweep_overrides": " ".join(overrides), "git_commit": git_commit(root) or "unknown"})
        client.log_param(run.info.run_id, "sweep_overrides", " ".join(overrides))
        sweep_dir = Path(config.hydra.sweep.dir)
        sweep_dir.mkdir(parents=True, exist_ok=True)
        (sweep_dir / PARENT_RUN_FILE).write_text(json.dumps({"run_id": run.info.run_id, "tracking_uri": uri}))
        log.info("mlflow: parent run %s for sweep %s", run.info.run_id, " ".join(overrides))

    def on_multirun_end(self, config, **kwargs) -> None:
        sweep_dir = Path(config.hydra.sweep.dir)
        parent = read_parent_run(sweep_dir)
        if parent is None:
            return
        from mlflow.tracking import MlflowClient

        uri = json.loads((sweep_dir / PARENT_RUN_FILE).read_text())["tracking_uri"]
        client = MlflowClient(uri)
        run = client.get_run(parent)
        children = client.search_runs([run.info.experiment_id], f"tags.mlflow.parentRunId = '{parent}'")
        failed = [c.info.run_name for c in children if c.info.status != "FINISHED"]
        client.log_metric(parent, "jobs", len(children))
        client.log_metric(parent, "jobs_failed", len(failed))
        client.set_terminated(parent, "FAILED" if failed else "FINISHED")
