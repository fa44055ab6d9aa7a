"""Hydra multirun bookkeeping: what each job did, and the sweep's summary. No MLflow here.

Files in the sweep dir (hydra.sweep.dir), whatever the launcher (basic, joblib, submitit):

    sweep.json              at the start: sweep id, overrides, the MLflow parent run id (or null)
    <job>/job_result.json   by each job: status "running", then "finished" (with its MLflow run id and
                            summary metrics) or "failed" (with the error); a job that still says
                            "running" at the end died without a word (killed, out of memory)
    sweep_summary.json      at the end: job count, failed jobs and why, best/worst per summary metric
"""

from __future__ import annotations

import json
import math
import time
import uuid
from pathlib import Path
from typing import Any

from pipeline.base.trees import flatten

SWEEP_FILE = "sweep.json"
JOB_FILE = "job_result.json"
SUMMARY_FILE = "sweep_summary.json"

# What a sweep is compared on. Lower is better for each: numerical errors of the encoding, words
# missing from GloVe, and how far adding the encoding moves the 2-D picture away from the pure word
# embedding (Procrustes disparity, max and mean over sentences and weight pairs).
SUMMARY_METRICS = (
    "encoding.norm_max_abs_dev",
    "encoding.offset_distance_max_spread",
    "embedding.oov_count",
    "sweep.pca_disparity_max",
    "sweep.pca_disparity_mean",
)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def summary_metrics(metrics: dict) -> dict[str, float]:
    """reports/metrics.json of one job -> {summary metric: value} (metrics it lacks are left out)."""
    flat = flatten(metrics)
    out = {key: float(flat[key]) for key in SUMMARY_METRICS if _number(flat.get(key))}
    disparities = [
        float(v) for k, v in flat.items() if k.startswith("sweep.") and k.endswith(".pca_disparity") and _number(v)
    ]
    if disparities:
        out["sweep.pca_disparity_max"] = max(disparities)
        out["sweep.pca_disparity_mean"] = sum(disparities) / len(disparities)
    return out


def _write(path: Path, obj: Any) -> None:
    from pipeline.base.files import write_json

    write_json(path, obj)


def start_sweep(sweep_dir: Path, overrides: list[str], parent_run_id: str | None, tracking_uri: str | None) -> dict:
    record = {
        "sweep_id": uuid.uuid4().hex,
        "overrides": overrides,
        "parent_run_id": parent_run_id,
        "tracking_uri": tracking_uri,
        "started": time.time(),
    }
    _write(Path(sweep_dir) / SWEEP_FILE, record)
    return record


def read_sweep(sweep_dir: Path) -> dict | None:
    path = Path(sweep_dir) / SWEEP_FILE
    return json.loads(path.read_text()) if path.exists() else None


def write_job(job_dir: Path, record: dict) -> None:
    _write(Path(job_dir) / JOB_FILE, record)


def job_label(job: dict) -> str:
    return f"#{job['num']} {' '.join(job['overrides']) or '(no overrides)'}"


def collect_jobs(sweep_dir: Path, sweep_id: str) -> list[dict]:
    """The job records of this sweep (a reused sweep dir may hold older ones), by job number."""
    jobs = []
    for path in Path(sweep_dir).rglob(JOB_FILE):
        record = json.loads(path.read_text())
        if record.get("sweep_id") == sweep_id:
            jobs.append(record)
    return sorted(jobs, key=lambda job: job["num"])


def summarize(jobs: list[dict]) -> dict:
    """Job records -> {"jobs", "finished", "failed": [{job, overrides, error, dir}], "metrics": {key: best/worst}}."""
    finished = [job for job in jobs if job["status"] == "finished"]
    failed = []
    for job in jobs:
        if job["status"] == "finished":
            continue
        error = job.get("error") or f"the job ended without a result (killed?): see its log in {job['dir']}"
        failed.append({"job": job["num"], "overrides": job["overrides"], "error": error, "dir": job["dir"]})
    metrics = {}
    for key in SUMMARY_METRICS:
        scored = [(job["metrics"][key], job) for job in finished if key in job.get("metrics", {})]
        if not scored:
            continue
        best = min(scored, key=lambda item: item[0])
        worst = max(scored, key=lambda item: item[0])
        metrics[key] = {
            "better": "lower",
            "best": {"value": best[0], "job": best[1]["num"], "overrides": best[1]["overrides"]},
            "worst": {"value": worst[0], "job": worst[1]["num"], "overrides": worst[1]["overrides"]},
        }
    return {"jobs": len(jobs), "finished": len(finished), "failed": failed, "metrics": metrics}


def summary_lines(summary: dict) -> list[str]:
    """The summary as text, one line each: counts, then each failed job, then best/worst per metric."""
    lines = [f"sweep: {summary['jobs']} jobs, {summary['finished']} finished, {len(summary['failed'])} failed"]
    for fail in summary["failed"]:
        lines.append(f"  FAILED {job_label({'num': fail['job'], 'overrides': fail['overrides']})}: {fail['error']}")
    for key, stat in summary["metrics"].items():
        best, worst = stat["best"], stat["worst"]
        lines.append(
            f"  {key} ({stat['better']} is better): best {best['value']:.6g} (#{best['job']}), "
            f"worst {worst['value']:.6g} (#{worst['job']})"
        )
    return lines
