"""The experiment in MLflow: one parent run, and under it one run per position family.

    parent   params: the length config (flattened); metrics: each family's bucket means; artifacts: summary.json,
             the two CSVs, length_generalisation.png
    family   params: the config and the family; metrics: <task>.<metric> at step = test length (the mean over
             seeds: MLflow draws it against the length), <task>.<metric>.seed<s> the same per seed, the bucket
             statistics <task>.<metric>.<bucket>.<stat>, each seed's final training loss; artifact: length_<family>.png

The store and its failure handling are the pipeline's (pipeline.outputs.tracking): an unreachable server is one
error before any training (`check_reachable`), a run left RUNNING by a killed process is ended FAILED by the next one.
A Hydra multirun's parent run is opened at its start (pipeline.length.__main__) and passed in.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from pipeline.base.errors import PipelineError
from pipeline.length.figure import draw
from pipeline.length.summary import METRICS, accuracies, grouped
from pipeline.outputs.tracking import _client, _params, _pending, _server_errors, git_commit

MAX_BATCH = 1000  # metrics per log_batch call (MLflow's limit)


def _metric_rows(summary: dict, results: list[dict], family: str, now: int) -> list:
    from mlflow.entities import Metric

    rows = []
    for task, families in grouped(results).items():
        runs = families.get(family, [])
        if not runs:
            continue
        per_seed = [accuracies(run) for run in runs]
        for metric in METRICS:
            for i, length in enumerate(runs[0]["lengths"]):
                mean = sum(float(acc[metric][i]) for acc in per_seed) / len(per_seed)
                rows.append(Metric(f"{task}.{metric}", mean, now, length))
                rows += [
                    Metric(f"{task}.{metric}.seed{run['seed']}", float(acc[metric][i]), now, length)
                    for run, acc in zip(runs, per_seed)
                ]
            for bucket, stat in summary["tasks"][task][family][metric].items():
                rows += [Metric(f"{task}.{metric}.{bucket}.{name}", value, now, 0) for name, value in stat.items()]
        rows += [Metric(f"{task}.final_loss.seed{run['seed']}", run["loss_curve"][-1], now, 0) for run in runs]
    return rows


def _log_batches(client, run_id: str, metrics: list, params: list | None = None, tags: list | None = None) -> None:
    """Params and tags, then the metrics MAX_BATCH at a time."""
    client.log_batch(run_id, params=params or [], tags=tags or [])
    for first in range(0, len(metrics), MAX_BATCH):
        client.log_batch(run_id, metrics=metrics[first : first + MAX_BATCH])


def _log_parent(client, run_id: str, summary: dict, files: list[Path], params, description: str, now: int) -> None:
    """The parent's bucket means (<family>.<task>.<metric>.<bucket>), params (None: the run has its own, a sweep's),
    the tables as its description and the result files."""
    from mlflow.entities import Metric, RunTag

    headline = [
        Metric(f"{family}.{task}.{metric}.{bucket}", stat["mean"], now, 0)
        for task, families in summary["tasks"].items()
        for family, metrics in families.items()
        for metric in METRICS
        for bucket, stat in metrics[metric].items()
    ]
    note = [RunTag("mlflow.note.content", description[:5000])] if description else []
    _log_batches(client, run_id, headline, params, note)
    for path in files:
        client.log_artifact(run_id, str(path))


def _log_family(client, run_id: str, family: str, summary: dict, results: list[dict], params, tmp: Path, now: int):
    """One family's run: the config and the family as params, its metrics (_metric_rows) and its figure."""
    train_length, symbols = summary["experiment"]["train_length"], summary["experiment"]["symbols"]
    _log_batches(client, run_id, _metric_rows(summary, results, family, now), params + _params({"family": family}))
    client.log_artifact(
        run_id,
        str(draw([r for r in results if r["family"] == family], train_length, symbols, tmp / f"length_{family}.png")),
    )


def log_experiment(
    config: dict,
    tracking: Any,
    summary: dict,
    results: list[dict],
    files: list[Path],
    root: Path,
    *,
    run_name: str,
    parent_run_id: str | None = None,
    extra_tags: dict[str, str] | None = None,
    description: str = "",
) -> dict[str, Any]:
    """Log the experiment: a parent run (or the given one, e.g. a sweep's, which this leaves open) with `files` and
    `description` (the tables), and one child per family. config: the composition as a dict ({"length": ...,
    "tracking": ...}); tracking: its TrackingConfig. Returns the run ids."""
    import tempfile

    client, experiment_id, uri = _client(tracking.uri, tracking.experiment, root)
    now = int(time.time() * 1000)
    tags = {"git_commit": git_commit(root) or "unknown", "experiment": "length", **(extra_tags or {})}
    params = _params({"length": config["length"]})
    own_parent = parent_run_id is None
    if own_parent:
        with _server_errors(uri, "creating the experiment's run"):
            parent_run_id = client.create_run(experiment_id, run_name=run_name, tags=tags).info.run_id
    # this process's open runs and their pending records: ended FAILED if logging breaks (the server's own error aside)
    pending = {parent_run_id: _pending(root, uri, parent_run_id)} if own_parent else {}
    children: dict[str, str] = {}
    try:
        with _server_errors(uri, "the experiment's runs", parent_run_id):
            _log_parent(client, parent_run_id, summary, files, params if own_parent else None, description, now)
            families = list(dict.fromkeys(family for t in summary["tasks"].values() for family in t))
            with tempfile.TemporaryDirectory() as tmp:
                for family in families:
                    child_tags = {**tags, "mlflow.parentRunId": parent_run_id, "family": family}
                    run_id = client.create_run(
                        experiment_id, run_name=f"{family} · {run_name}", tags=child_tags
                    ).info.run_id
                    pending[run_id] = _pending(root, uri, run_id)
                    _log_family(client, run_id, family, summary, results, params, Path(tmp), now)
                    client.set_terminated(run_id, "FINISHED")
                    pending.pop(run_id).unlink(missing_ok=True)
                    children[family] = run_id
            if own_parent:
                client.set_terminated(parent_run_id, "FINISHED")
                pending.pop(parent_run_id).unlink(missing_ok=True)
    except PipelineError:
        raise  # the server stopped answering: its runs stay pending, ended FAILED by the next run that reaches it
    except BaseException as exc:
        for run_id, record in reversed(pending.items()):
            client.set_tag(run_id, "error", f"{type(exc).__name__}: {exc}"[:5000])
            client.set_terminated(run_id, "FAILED")
            record.unlink(missing_ok=True)
        raise
    return {"parent_run_id": parent_run_id, "family_run_ids": children, "experiment_id": experiment_id}
