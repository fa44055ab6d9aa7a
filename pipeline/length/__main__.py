"""`python -m pipeline.length [overrides]`: the length-generalisation experiment as a Hydra app (conf/length_experiment.yaml).

    python -m pipeline.length                                    # the documented config: outputs/length/runs/<time>/
    python -m pipeline.length length=quick                       # one seed of the copy task
    python -m pipeline.length -m hydra/launcher=parallel 'length.families=[sinusoidal],[learned],[rope],[alibi],[nope]' \\
        'length.seeds=[0],[1],[2]'                               # 15 jobs, 2 at a time, one MLflow parent run

One run trains what the run store lacks (pipeline.length.runs: an interrupted run resumes from its checkpoint), writes
results/ into its folder (summary.json, the CSVs, the figure) and logs one MLflow parent run with a run per family. A
multirun's jobs each train their share of the grid; at its end pipeline.length.sweep.LengthSweep gathers every job's
runs into <sweep dir>/results/ and logs the run per family under the sweep's parent run. A job that fails does not stop
the others; the sweep then exits 1. The DVC way to run it: experiments/length/ (docs/length-experiment.md).
"""

from __future__ import annotations

import logging
from pathlib import Path

import hydra
from omegaconf import DictConfig, OmegaConf

from pipeline.base.paths import checkout_root
from pipeline.config.schema import register

register()  # the config schemas, before @hydra.main composes conf/

log = logging.getLogger("pipeline")
CONF_DIR = str(checkout_root() / "conf")


def check(params: dict, processes: int | None = None):
    """The composition validated (pipeline.config.schema.LengthExperimentConfig) and its limits checked
    (pipeline.config.limits.check_length); returns the config."""
    from pipeline.config.limits import check_length
    from pipeline.config.schema import LENGTH, validate
    from pipeline.core.device import resolve_device
    from pipeline.length.experiment import workers

    cfg = validate(params, LENGTH.schema)
    on_cpu = resolve_device(cfg.length.device, key="length.device").type == "cpu"
    check_length(cfg.length, processes or workers(cfg.length), on_cpu=on_cpu)
    return cfg


def _single_run(config, out: Path, root: Path, overrides: list[str]) -> None:
    """One run of the app (no multirun): the whole experiment into out/results, logged as one MLflow parent run."""
    from pipeline.length.experiment import run_experiment
    from pipeline.outputs.tracking import check_reachable

    if config.tracking.enabled:
        check_reachable(config.tracking.uri, root)
    name = " ".join(overrides) or "defaults"
    run_experiment(
        config.length,
        config.tracking,
        out / "results",
        root,
        run_name=f"length {name}",
        extra_tags={"runner": "hydra", "overrides": name},
    )


@hydra.main(config_path=CONF_DIR, config_name="length_experiment", version_base="1.3")
def app(cfg: DictConfig) -> None:
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    from pipeline.base.errors import PipelineError
    from pipeline.length.experiment import settings, train_runs
    from pipeline.outputs.multirun import read_sweep, write_job

    hydra_cfg = HydraConfig.get()
    out = Path(hydra_cfg.runtime.output_dir)
    multirun = hydra_cfg.mode == RunMode.MULTIRUN
    overrides = list(hydra_cfg.overrides.task)
    sweep = read_sweep(Path(hydra_cfg.sweep.dir).resolve()) if multirun else None
    # jobs run side by side (joblib) share the cores: one process each (docs/sweeps.md)
    parallel = multirun and OmegaConf.select(hydra_cfg, "launcher.n_jobs", default=1) not in (0, 1)
    job = {
        "sweep_id": sweep["sweep_id"] if sweep else None,
        "num": OmegaConf.select(hydra_cfg, "job.num", default=0),
        "overrides": overrides,
        "dir": str(out),
        "status": "running",
    }
    write_job(out, job)
    root = checkout_root()
    try:
        params = OmegaConf.to_container(cfg, resolve=True)
        config = check(params, 1 if parallel else None)
        if not multirun:
            _single_run(config, out, root, overrides)
            write_job(out, {**job, "status": "finished"})
            return None
        computed, chosen = train_runs(config.length, root, 1 if parallel else None)
    except Exception as exc:
        error = str(exc) if isinstance(exc, PipelineError) else f"{type(exc).__name__}: {exc}"
        (log.error if isinstance(exc, PipelineError) else log.exception)("%s", error)
        write_job(out, {**job, "status": "failed", "error": error})
        if not multirun:
            if isinstance(exc, PipelineError):
                raise SystemExit(2) from None
            raise
        return None  # the sweep goes on; LengthSweep reports the failure at its end and exits 1
    results = [result for result, _ in computed]
    write_job(
        out,
        {
            **job,
            "status": "finished",
            "settings": settings(config.length),
            "results": results,
            "search": chosen,
            "metrics": job_metrics(results, settings(config.length)),
        },
    )
    return None


def job_metrics(results: list[dict], experiment: dict) -> dict[str, float]:
    """The job's row in the sweep's table: per-token accuracy in each length bucket, the mean over the job's runs
    (its overrides say which tasks, families and seeds they are)."""
    from pipeline.length.summary import accuracies, buckets

    spans = buckets(experiment["train_length"], experiment["test_length"], experiment["bucket"])
    per_run = [accuracies(result)["token_accuracy"] for result in results]
    return {
        f"token_accuracy.{b.name}": sum(float(acc[b.first - 1 : b.last].mean()) for acc in per_run) / len(per_run)
        for b in spans
    }


if __name__ == "__main__":
    import gc
    import sys

    from pipeline.base.errors import PipelineError
    from pipeline.config import limits

    overrides = [arg for arg in sys.argv[1:] if "=" in arg and not arg.startswith("-")]
    if "-m" in sys.argv[1:] or "--multirun" in sys.argv[1:]:
        try:
            limits.check_length_multirun(overrides)
        except PipelineError as exc:
            print(f"error: {exc}", file=sys.stderr)
            raise SystemExit(2) from None
    from pipeline.base import stops

    stops.run_app(app)  # a stop: its workers ended, the sweep's runs KILLED, one line
    gc.freeze()  # no final collection of the runs' heap (pipeline.stages._cli.stage_main says why)
