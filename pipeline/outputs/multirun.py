"""Hydra multirun bookkeeping: what each job did, and the sweep's summary. No MLflow here.

Files in the sweep dir (hydra.sweep.dir), whatever the launcher (basic, joblib, submitit):

    sweep.json              at the start: sweep id, overrides, the MLflow parent run id (or null)
    <job>/job_result.json   by each job: status "running", then "finished" (with its MLflow run id and
                            summary metrics) or "failed" (with the error); a job that still says
                            "running" at the end died without a word (killed, out of memory)
    sweep_summary.json      at the end: job count, failed jobs and why, and a per-job table of the headline
                            (`job_metrics`: reports/headline.json and the families table's property numbers):
                            columns every swept key (an override whose value differs between the jobs) and the
                            metrics that vary between the finished jobs; the metrics equal in every job listed
                            once ("same")
    sweep_summary.csv       the same table as a CSV
    sweep_summary.png       the headline against each swept key (pipeline.figures.sweep_summary)
"""

from __future__ import annotations

import csv
import io
import json
import re
import statistics
import textwrap
import time
import uuid
from pathlib import Path
from typing import Any

from pipeline.base.files import write_json

SWEEP_FILE = "sweep.json"
JOB_FILE = "job_result.json"
SUMMARY_FILE = "sweep_summary.json"
TABLE_FILE = "sweep_summary.csv"
FIGURE_FILE = "sweep_summary.png"
WIDTH = 199  # printed lines stay narrower than this
SHOWN_ROWS = 20  # jobs printed; every job is in the JSON and CSV files
RSTAR = re.compile(r"r_star\.s\d+")  # a listed sentence's r* in headline.json
PROPERTIES = "properties."  # the prefix of the families table's numbers among a job's metrics (`job_metrics`)


def start_sweep(sweep_dir: Path, overrides: list[str], parent_run_id: str | None, tracking_uri: str | None) -> dict:
    record = {
        "sweep_id": uuid.uuid4().hex,
        "overrides": overrides,
        "parent_run_id": parent_run_id,
        "tracking_uri": tracking_uri,
        "started": time.time(),
    }
    write_json(Path(sweep_dir) / SWEEP_FILE, record)
    return record


def read_sweep(sweep_dir: Path) -> dict | None:
    path = Path(sweep_dir) / SWEEP_FILE
    return json.loads(path.read_text()) if path.exists() else None


def write_job(job_dir: Path, record: dict) -> None:
    write_json(Path(job_dir) / JOB_FILE, record)


def job_metrics(job_dir: Path) -> dict:
    """A finished job's numbers for the sweep's table: its headline (reports/headline.json: r* per listed sentence,
    the summary over sentences (r_star.median: of every sentence's r*, also when the texts hold no more sentences
    than it lists), the property checks) and the families table's property numbers
    (reports/properties.json: `properties.<family>.<property>`, the numeric values only), flat."""
    from pipeline.base.files import read_json
    from pipeline.base.paths import Layout

    layout = Layout(Path(job_dir))
    metrics = dict(read_json(layout.headline_metrics))
    if "r_star.median" not in metrics:  # headline.json has it only beyond the listed sentences: every sentence here
        r_stars = [v for k, v in metrics.items() if RSTAR.fullmatch(k) and isinstance(v, (int, float))]
        metrics = {"r_star.median": float(statistics.median(r_stars)) if r_stars else None, **metrics}
    if layout.properties_metrics.exists():
        for family, row in read_json(layout.properties_metrics).get("families", {}).items():
            for name, cell in row.items():
                value = cell.get("value") if isinstance(cell, dict) else None
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    metrics[f"{PROPERTIES}{family}.{name}"] = value
    return metrics


def figure_set_of_job(choice: str | None, overrides: list[str]) -> str | None:
    """The figure set a multirun job draws when the command line chose none: `summary` (what a point needs,
    docs/sweeps.md) in place of the default `all`; None keeps the composed one (`choice`, conf/'s figures option:
    `figures=all`, `figures=none` or `figures.name=...` on the command line, or another default in conf/)."""
    chosen = any(item.split("=", 1)[0].lstrip("+~") in ("figures", "figures.name") for item in overrides)
    return "summary" if choice == "all" and not chosen else None


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


def _overrides(job: dict) -> dict[str, str]:
    """A job's overrides as {key: value} ("sweep.w2=4" -> {"sweep.w2": "4"}; "~key" -> {"~key": ""})."""
    return dict(item.split("=", 1) if "=" in item else (item, "") for item in job["overrides"])


def _varying(rows: list[dict]) -> tuple[list[str], dict]:
    """(the keys whose value differs between rows or is missing in some, in first-seen order; {key: value} of the
    others)."""
    keys = list(dict.fromkeys(key for row in rows for key in row))
    varying = [key for key in keys if len({json.dumps(row.get(key)) for row in rows}) > 1]
    return varying, {key: rows[0][key] for key in keys if key not in varying}


def summarize(jobs: list[dict]) -> dict:
    """Job records -> {"jobs", "finished", "failed": [{job, overrides, error, dir}], "keys", "varying", "columns",
    "rows", "same"}.

    keys: the swept keys, the override keys whose value differs between the jobs (all of them, failed ones too);
    rows: one per finished job, {"job": num, <swept key>: value (as given), <metric>: value}; columns: "job", the
    swept keys and the metrics: every headline metric (reports/headline.json) and the property numbers that vary
    (the families table's other numbers are the same in every job unless `relative.*` is swept); varying: the
    metrics whose value differs between the finished jobs (what the printed table shows); same: the metrics equal
    in every finished job, {metric: value}."""
    finished = [job for job in jobs if job["status"] == "finished"]
    failed = []
    for job in jobs:
        if job["status"] == "finished":
            continue
        error = job.get("error") or f"the job ended without a result (killed?): see its log in {job['dir']}"
        failed.append({"job": job["num"], "overrides": job["overrides"], "error": error, "dir": job["dir"]})
    overrides, _ = _varying([_overrides(job) for job in jobs])
    varying, same = _varying([job.get("metrics", {}) for job in finished]) if finished else ([], {})
    every = list(dict.fromkeys(key for job in finished for key in job.get("metrics", {})))
    metrics = [key for key in every if not key.startswith(PROPERTIES) or key in varying]
    rows = [
        {
            "job": job["num"],
            **{key: _overrides(job).get(key) for key in overrides},
            **{key: job.get("metrics", {}).get(key) for key in metrics},
        }
        for job in finished
    ]
    return {
        "jobs": len(jobs),
        "finished": len(finished),
        "failed": failed,
        "keys": overrides,
        "varying": varying,
        "columns": ["job", *overrides, *metrics],
        "rows": rows,
        "same": same,
    }


def write_table(path: Path, summary: dict) -> None:
    """The summary's per-job table as a CSV (a missing value is an empty cell)."""
    from pipeline.base.files import write_text

    lines = io.StringIO()
    writer = csv.writer(lines, lineterminator="\n")
    writer.writerow(summary["columns"])
    writer.writerows([["" if row.get(c) is None else row[c] for c in summary["columns"]] for row in summary["rows"]])
    write_text(Path(path), lines.getvalue())


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def table_lines(summary: dict, where: str = TABLE_FILE) -> list[str]:
    """The per-job table as fixed-width text: the job, the swept keys and the metrics that vary, the columns that
    fit in WIDTH characters and the first SHOWN_ROWS jobs, then a line naming `where` the rest is."""
    columns = ["job", *summary["keys"], *summary["varying"]]
    cells = [[_cell(row.get(c)) for c in columns] for row in summary["rows"]]
    widths = [max([len(c), *(len(row[i]) for row in cells)]) for i, c in enumerate(columns)]
    shown, width = 0, 0
    while shown < len(widths) and width + widths[shown] + 2 <= WIDTH:
        width += widths[shown] + 2
        shown += 1

    def line(values: list[str]) -> str:
        return "  " + "  ".join(v.rjust(w) for v, w in zip(values[:shown], widths)).rstrip()

    lines = [line(columns), *(line(row) for row in cells[:SHOWN_ROWS])]
    rest = []
    if len(cells) > SHOWN_ROWS:
        rest.append(f"{len(cells) - SHOWN_ROWS} more jobs")
    if shown < len(widths):
        rest.append(f"{len(widths) - shown} more columns")
    if rest:
        lines.append(f"  ({' and '.join(rest)} in {where})")
    return lines


def summary_lines(summary: dict, where: str = TABLE_FILE) -> list[str]:
    """The summary as text: counts, each failed job, the per-job table, and the metrics that do not vary."""
    lines = [f"sweep: {summary['jobs']} jobs, {summary['finished']} finished, {len(summary['failed'])} failed"]
    for fail in summary["failed"]:
        lines.append(f"  FAILED {job_label({'num': fail['job'], 'overrides': fail['overrides']})}: {fail['error']}")
    if summary["rows"]:
        lines.extend(table_lines(summary, where))
    headline = {key: value for key, value in summary["same"].items() if not key.startswith(PROPERTIES)}
    properties = len(summary["same"]) - len(headline)
    if summary["same"]:
        same = ", ".join(f"{key} {_cell(value)}" for key, value in headline.items())
        if properties:  # the families table: dozens of numbers, in each job's reports/properties.json
            same += f"{', and ' if same else ''}the families table's {properties} property numbers"
        lines.extend(
            textwrap.wrap(f"same in every job: {same}", WIDTH - 2, initial_indent="  ", subsequent_indent="    ")
        )
    return lines
