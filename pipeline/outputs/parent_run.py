"""Hydra multirun: one parent MLflow run per sweep, and the sweep's summary at its end (the callback that
conf/config.yaml names). Apart from pipeline.outputs.tracking, so that the stages that log or check a store do not
import Hydra (docs/benchmarks-measurements.md#imports-avoided)."""

from __future__ import annotations

import atexit
import logging
import time
from pathlib import Path

from hydra.experimental.callback import Callback

from pipeline.base.errors import PipelineError
from pipeline.base.paths import project_root
from pipeline.outputs.tracking import (
    _client,
    _pending,
    _server_errors,
    check_reachable,
    git_commit,
    redact,
    sweep_run_name,
)

log = logging.getLogger("pipeline")
BATCH = 1000  # metrics per log_batch call: MLflow's limit for one request
_STARTED: list["MultirunParentRun"] = []  # this process's sweeps (their parent runs), for `end_interrupted`


class MultirunParentRun(Callback):
    """Hydra callback (conf/config.yaml): one parent MLflow run per multirun, a summary at its end.

    Start: checks the tracking server answers (else exit 2 before any job), opens the parent run
    (tagged with the sweep's overrides) and writes <sweep dir>/sweep.json; jobs log as its children
    (pipeline/__main__.py) and write <job dir>/job_result.json. End: summarizes the job records
    (pipeline.outputs.multirun) into sweep_summary.json, sweep_summary.csv (a per-job table of the headline) and
    sweep_summary.png (the headline against the swept keys, pipeline.figures.sweep_summary), the log, and the parent
    run (metrics jobs, jobs_finished, jobs_failed and each varying metric of the table at step = job number; the
    three files; the table as its description; a tag naming the failed jobs and why),
    closes the parent FAILED if any job failed, and then exits 1 so the sweep's status says so.
    Runs in the launching process for every launcher; jobs may run elsewhere (joblib, submitit).
    """

    def __init__(self) -> None:
        self._open: tuple[str, str, Path] | None = None  # (uri, parent run id, its pending record) until the end

    def on_multirun_start(self, config, **kwargs) -> None:
        from omegaconf import OmegaConf

        from pipeline.outputs.multirun import start_sweep

        tracking = config.tracking  # composed on the schema: TrackingConfig's keys and types
        overrides = list(config.hydra.overrides.task)
        sweep_dir = Path(config.hydra.sweep.dir).resolve()
        parent, uri = None, None
        if tracking.enabled:
            root = project_root()
            launcher = OmegaConf.select(config, "hydra.launcher._target_", default="") or ""
            tags = {
                "sweep_overrides": " ".join(overrides),
                "git_commit": git_commit(root) or "unknown",
                "launcher": launcher.rsplit(".", 1)[-1],
                "sweep_dir": str(sweep_dir),
            }
            try:
                check_reachable(tracking.uri, root)
                client, experiment_id, uri = _client(tracking.uri, tracking.experiment, root)
                with _server_errors(uri, "creating the sweep's parent run"):
                    parent = client.create_run(
                        experiment_id, run_name=sweep_run_name(overrides, time.time()), tags=tags
                    )
                parent = parent.info.run_id
                # killed (kill -9, out of memory) before its end: the next process that opens the store ends it
                self._open = (uri, parent, _pending(root, uri, parent))
                _STARTED.append(self)
                atexit.register(self._close_if_open)
                with _server_errors(uri, "the sweep's parent run", parent):
                    client.log_param(parent, "sweep_overrides", " ".join(overrides)[:6000])
            except PipelineError as exc:
                log.error("%s", exc)
                raise SystemExit(2) from None  # Hydra turns a callback's exception into a warning
            log.info("mlflow: parent run %s for sweep %s", parent, " ".join(overrides))
        start_sweep(sweep_dir, overrides, parent, redact(uri) if uri else None)

    def on_multirun_end(self, config, **kwargs) -> None:
        from pipeline.base.files import write_json
        from pipeline.outputs.multirun import (
            SUMMARY_FILE,
            TABLE_FILE,
            collect_jobs,
            read_sweep,
            summarize,
            summary_lines,
            write_table,
        )

        sweep_dir = Path(config.hydra.sweep.dir).resolve()
        sweep = read_sweep(sweep_dir)
        if sweep is None:
            return
        summary = summarize(collect_jobs(sweep_dir, sweep["sweep_id"]))
        write_json(sweep_dir / SUMMARY_FILE, summary)
        write_table(sweep_dir / TABLE_FILE, summary)
        for line in summary_lines(summary, str(sweep_dir / TABLE_FILE)):
            (log.error if line.lstrip().startswith("FAILED") else log.info)("%s", line)
        files = [sweep_dir / SUMMARY_FILE, sweep_dir / TABLE_FILE, *_summary_figure(summary, sweep_dir, config)]
        failed = bool(summary["failed"]) or summary["jobs"] == 0
        if summary["jobs"] == 0:
            log.error("sweep: no job wrote its result (job_result.json) under %s", sweep_dir)
        # this process's parent run (sweep.json may name another's, in a folder two sweeps were told to share)
        if self._open:
            uri, parent, pending = self._open
            self._open = None
            try:
                with _server_errors(uri, "the sweep's summary", parent):
                    status = "FAILED" if failed else "FINISHED"
                    _log_summary(uri, parent, summary, files, status)
            except PipelineError as exc:  # the server stopped answering: the next run ends the parent FAILED
                log.error("%s", exc)
                failed = True
            else:
                pending.unlink(missing_ok=True)
        if failed:
            raise SystemExit(1)  # after everything is recorded: the sweep's exit status says a job failed

    def _close_if_open(self, status: str = "FAILED", why: str = "the sweep stopped before its end") -> str | None:
        """At exit, a parent run the sweep never reached the end of (launcher crash) is closed FAILED; after a stop
        signal, KILLED (`end_interrupted`). Returns its id, if it was open."""
        if self._open is None:
            return None
        from mlflow.tracking import MlflowClient

        uri, parent, pending = self._open
        self._open = None
        client = MlflowClient(uri)
        try:
            client.set_tag(parent, "error", f"{why}: see the console output")
            client.set_terminated(parent, status)
        except Exception as exc:  # noqa: BLE001 - at exit: the pending record stays, the next run ends it
            log.error("mlflow: could not end the sweep's parent run %s: %s", parent, redact(str(exc))[:300])
        else:
            pending.unlink(missing_ok=True)
        return parent


def end_interrupted(signal_name: str) -> tuple[list[str], list[str]]:
    """After a stop signal, once the sweep's workers are stopped: end the job runs left RUNNING (by this process, or
    by the stopped ones) and then the parent run of each sweep this process started, as KILLED. Returns (the parent
    runs' ids, the job runs' ids)."""
    from mlflow.tracking import MlflowClient

    from pipeline.outputs.tracking import close_abandoned_runs

    why = f"interrupted by {signal_name}"
    parents, jobs = [], []
    for sweep in _STARTED:
        if sweep._open is None:
            continue
        uri = sweep._open[0]
        try:
            jobs += close_abandoned_runs(MlflowClient(uri), uri, project_root(), "KILLED", why, ours=True)
        except Exception as exc:  # noqa: BLE001 - the pending records stay: the next run ends them
            log.error("mlflow: could not end the sweep's job runs: %s", redact(str(exc))[:300])
        parents.append(sweep._close_if_open("KILLED", why))
    return [p for p in parents if p], jobs


def _summary_figure(summary: dict, sweep_dir: Path, config) -> list[Path]:
    """[sweep_summary.png] in the sweep dir, or [] when there is nothing to draw (no finished job, no swept key). A
    failure to draw is logged with its traceback and leaves the rest of the summary (files, parent run) whole."""
    from omegaconf import OmegaConf

    from pipeline.outputs.multirun import FIGURE_FILE

    try:
        from pipeline.figures.sweep_summary import draw

        drawn = draw(summary, sweep_dir / FIGURE_FILE, dpi=OmegaConf.select(config, "figures.dpi", default=110))
    except Exception:  # noqa: BLE001 - the summary's files and parent run matter more than its figure
        log.exception("sweep: could not draw %s", sweep_dir / FIGURE_FILE)
        return []
    if drawn is not None:
        log.info("sweep: the headline against the swept keys: %s", drawn)
    return [drawn] if drawn is not None else []


def _log_summary(uri: str, parent: str, summary: dict, files: list[Path], status: str) -> None:
    from mlflow.entities import Metric, RunTag
    from mlflow.tracking import MlflowClient

    from pipeline.outputs.multirun import TABLE_FILE, job_label, summary_lines

    client = MlflowClient(uri)
    now = int(time.time() * 1000)
    metrics = {"jobs": summary["jobs"], "jobs_finished": summary["finished"], "jobs_failed": len(summary["failed"])}
    # the table's varying metrics, one point per finished job (step: its number): the parent's charts plot them
    keys = {"job", *summary["keys"]}
    steps = [
        Metric(column, float(row[column]), now, row["job"])
        for row in summary["rows"]
        for column in summary["columns"]
        if column not in keys and isinstance(row.get(column), (int, float))
    ]
    tags = {}
    if summary["failed"]:
        tags["failed_jobs"] = "\n".join(
            f"{job_label({'num': f['job'], 'overrides': f['overrides']})}: {f['error']}" for f in summary["failed"]
        )[:5000]
    tags["mlflow.note.content"] = "\n".join(summary_lines(summary, TABLE_FILE))[:5000]  # the run's description
    client.log_batch(
        parent,
        metrics=[Metric(k, float(v), now, 0) for k, v in metrics.items()],
        tags=[RunTag(k, v) for k, v in tags.items()],
    )
    for start in range(0, len(steps), BATCH):
        client.log_batch(parent, metrics=steps[start : start + BATCH])
    for path in files:
        client.log_artifact(parent, str(path))
    client.set_terminated(parent, status)
