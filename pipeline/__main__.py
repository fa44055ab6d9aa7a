"""`python -m pipeline [overrides]`: the whole pipeline in-process as a Hydra app.

    python -m pipeline                                   # one run, outputs in outputs/runs/<time>/
    python -m pipeline -m sweep.w2=1,10 texts=seed,file  # multirun: 4 jobs, one MLflow parent run
    python -m pipeline -m hydra/launcher=parallel sweep.w2=1,2,4,8   # 2 jobs at a time (joblib)
    python -m pipeline -m hydra/launcher=submitit_local ...           # each job a submitit process
    python -m pipeline -m hydra/launcher=slurm hydra.launcher.partition=NAME ...   # on a SLURM cluster

Each job writes its data/ and reports/ under its own Hydra output directory (the DVC workspace is
left alone) and logs one MLflow run. GloVe stores are shared between jobs through
data/cache/stores/, keyed by the glove config; the other stage outputs the jobs of a multirun share (tokens,
encoding) are computed once per sweep and reused by content hash (pipeline.stages.stage_cache, <sweep dir>/.stage_cache/).
A multirun draws figures=summary unless its command line names a figure set (docs/sweeps.md).

A job that fails (a bad override value, a bug) does not stop the sweep: it writes its error into
<job dir>/job_result.json and a FAILED child run; the other jobs go on, and at the end
pipeline.outputs.parent_run.MultirunParentRun reports which jobs failed and why, and exits 1.

Ctrl-C, SIGTERM or SIGHUP (to this process or its process group), whatever the launcher, stops the sweep: its figure
workers, joblib's worker processes and submitit's job processes are ended, the job runs left RUNNING and the sweep's
parent run are ended KILLED, and one line says so (exit 130, 143 or 129). Jobs in processes of their own ignore Ctrl-C:
the launching process stops them.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import hydra
from omegaconf import DictConfig, OmegaConf

from pipeline.base.paths import checkout_root
from pipeline.config.schema import GloveConfig, register

register()  # the config schema, before @hydra.main composes conf/

log = logging.getLogger("pipeline")
CONF_DIR = str(checkout_root() / "conf")
LAUNCHER_ENV = "PE_SWEEP_LAUNCHER"  # the pid of the process that launched the run: its jobs' processes inherit it


def shared_glove_store(glove: GloveConfig, root: Path) -> Path:
    """Build (once) and return the GloVe store for this glove config under data/cache/stores/ (hard links to
    data/glove when the DVC run built that from the same config: `project_store`)."""
    from dataclasses import asdict

    from pipeline.base.paths import download_cache
    from pipeline.inputs.glove_sources import acquire

    key = hashlib.sha256(json.dumps(asdict(glove), sort_keys=True).encode()).hexdigest()[:12]
    cache = download_cache(root)
    store = cache / "stores" / f"{glove.name}-{key}"
    if not (store / "manifest.json").exists():
        from pipeline.base.locks import machine_lock

        # parallel jobs of one sweep: one builds the store, the others wait for it (a download can take long)
        with machine_lock(f"glove-store:{store}", f"the GloVe store {store} to be built", timeout=3 * 3600):
            if not (store / "manifest.json").exists():
                built = project_store(glove, root)
                if built is not None:  # the DVC run's store of this config: linked, one copy on disk
                    from pipeline.base.files import link, replace_dir

                    replace_dir(store, lambda tmp: [link(f, tmp / f.name) for f in built.iterdir() if f.is_file()])
                else:
                    acquire(glove, store, root, cache_dir=cache)
    return store


def project_store(glove: GloveConfig, root: Path) -> Path | None:
    """data/glove when the DVC pipeline built it from this very glove config and it is up to date (dvc.lock's
    glove params equal `glove`, `dvc status glove` reports nothing changed); None otherwise (or when DVC is busy)."""
    import subprocess
    import sys
    from dataclasses import asdict

    import yaml

    from pipeline.base.paths import Layout

    layout = Layout(root)
    if not (layout.glove_dir / "manifest.json").exists() or not layout.dvc_lock.exists():
        return None
    locked = yaml.safe_load(layout.dvc_lock.read_text()).get("stages", {}).get("glove", {})
    if locked.get("params", {}).get("params.yaml", {}).get("glove") != asdict(glove):
        return None
    status = subprocess.run(
        [sys.executable, "-m", "dvc", "status", "--json", "glove"], cwd=root, capture_output=True, text=True
    )
    return layout.glove_dir if status.returncode == 0 and json.loads(status.stdout or "null") == {} else None


def run_job(
    params: dict,
    out: Path,
    root: Path,
    *,
    parent_run_id: str | None = None,
    overrides: list[str] = (),
    cache: Path | None = None,
) -> dict:
    """The registry's in-process stages for one composed config into `out`; returns the MLflow record.

    cache: the sweep's folder of shared outputs (pipeline.stages.stage_cache): a stage whose inputs and params an earlier
    job of the sweep had already (tokens and encoding, in a sweep over `sweep.*`) is not run again, nor a figure
    drawn from the same data (pipeline.figures.cache).
    """
    from pipeline.base.files import write_text
    from pipeline.base.paths import Layout
    from pipeline.config import check, dump_params
    from pipeline.outputs.tracking import check_reachable, default_run_name, log_result
    from pipeline.stages.registry import job_stages, logged_outputs
    from pipeline.stages.stage_cache import run_stages

    cfg = check(params, root)  # the one validation of this job; the stages read cfg
    if cfg.tracking.enabled:
        check_reachable(cfg.tracking.uri, root)
    layout = Layout(out, glove=shared_glove_store(cfg.glove, root), shared=cache)
    write_text(layout.params, dump_params(params, overrides, root))
    run_stages(job_stages(), cfg, layout, root)
    if not cfg.tracking.enabled:
        return {"enabled": False}
    name = default_run_name(params, None, [o for o in overrides if not o.startswith("tracking.")])
    overrides = " ".join(overrides)
    record = log_result(
        params,
        layout,
        root,
        artifacts=logged_outputs(job_stages()),
        parent_run_id=parent_run_id,
        share_inputs=parent_run_id is not None,
        run_name=name,
        extra_tags={"runner": "hydra", "overrides": overrides},
    )
    log.info("mlflow: run %s (%s)", record["run_id"], overrides or "defaults")
    return record


def record_failed_run(params: dict | None, parent_run_id: str | None, overrides: list[str], error: str) -> None:
    """Best effort: the failed job as a FAILED child run, so the MLflow UI shows it beside the others."""
    from pipeline.outputs.tracking import check_reachable, log_failed_run

    tracking = (params or {}).get("tracking", {})  # a dict: the job may have failed on an invalid config
    if not tracking.get("enabled"):
        return
    try:
        check_reachable(tracking.get("uri"))  # a dead server: say so now, not after MLflow's minutes of retries
        log_failed_run(
            params,
            checkout_root(),
            run_name=" ".join(overrides) or "defaults",
            error=error,
            parent_run_id=parent_run_id,
            extra_tags={"runner": "hydra", "overrides": " ".join(overrides)},
        )
    except Exception as exc:  # noqa: BLE001 - the job record and the sweep summary still hold the error
        log.warning("could not record the failed job in MLflow: %s", exc)


class JobTag(logging.Formatter):
    """A handler's own formatter with `[job N] ` before every line: the lines of a multirun's jobs tell which job
    wrote them, in the console where parallel jobs (joblib) interleave, and in each job's log file."""

    def __init__(self, inner: logging.Formatter, num: int) -> None:
        super().__init__()
        self.inner, self.prefix = inner, f"[job {num}] "

    def format(self, record: logging.LogRecord) -> str:
        return "\n".join(self.prefix + line for line in self.inner.format(record).split("\n"))


@contextmanager
def tagged_job_logs(num: int) -> Iterator[None]:
    """Inside: every log line of this job starts with its number (the handlers Hydra configured for the job); after
    it, the handlers' own formatters again, so that the launcher's lines between jobs and the sweep's summary carry
    no job's number."""
    handlers = [(handler, handler.formatter) for handler in logging.getLogger().handlers]
    for handler, formatter in handlers:
        handler.setFormatter(JobTag(formatter or logging.Formatter(), num))
    try:
        yield
    finally:
        for handler, formatter in handlers:
            handler.setFormatter(formatter)


@hydra.main(config_path=CONF_DIR, config_name="config", version_base="1.3")
def app(cfg: DictConfig) -> None:
    from contextlib import nullcontext

    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    launcher = int(os.environ.get(LAUNCHER_ENV, os.getpid()))
    if launcher != os.getpid():  # a job in a process of its own: the launcher stops it
        import signal

        signal.signal(signal.SIGINT, signal.SIG_IGN)
        if os.getppid() == launcher:  # its worker (joblib's loky, submitit_local): dies with it, even by kill -9
            from pipeline.base.processes import dying_with_parent

            dying_with_parent()()
            if os.getppid() != launcher:  # it died just before
                os._exit(128 + signal.SIGKILL)
    hydra_cfg = HydraConfig.get()
    multirun = hydra_cfg.mode == RunMode.MULTIRUN
    num = OmegaConf.select(hydra_cfg, "job.num", default=0)
    with tagged_job_logs(num) if multirun else nullcontext():
        job(cfg, hydra_cfg, multirun, num)


def job(cfg: DictConfig, hydra_cfg: DictConfig, multirun: bool, num: int) -> None:
    """One run or one multirun job: its record (job_result.json), the stages, its MLflow run; a multirun job that
    fails records why and returns (the sweep goes on)."""
    from pipeline.outputs.multirun import figure_set_of_job, job_metrics, read_sweep, write_job
    from pipeline.stages.stage_cache import CACHE_DIR

    out = Path(hydra_cfg.runtime.output_dir)
    sweep = read_sweep(Path(hydra_cfg.sweep.dir).resolve()) if multirun else None
    overrides = list(hydra_cfg.overrides.task)
    if multirun:
        from pipeline.base import worker_pool

        worker_pool.keep()  # the jobs of this process share one warm pool of figure workers
        if OmegaConf.select(hydra_cfg, "launcher.n_jobs", default=1) not in (0, 1):
            cfg.figures.workers = 1  # jobs in parallel (joblib) already share the cores: docs/sweeps.md
        figure_set = figure_set_of_job(hydra_cfg.runtime.choices.get("figures"), overrides)
        if figure_set is not None:  # a multirun draws what a point needs unless the command line says otherwise
            cfg.figures.name = figure_set
    parent = sweep["parent_run_id"] if sweep else None
    record = {
        "sweep_id": sweep["sweep_id"] if sweep else None,
        "num": num,
        "overrides": overrides,
        "dir": str(out),
        "status": "running",
    }
    write_job(out, record)
    params = None
    try:
        params = OmegaConf.to_container(cfg, resolve=True)
        run = run_job(
            params,
            out,
            checkout_root(),
            parent_run_id=parent,
            overrides=overrides,
            cache=Path(hydra_cfg.sweep.dir).resolve() / CACHE_DIR if multirun else None,
        )
    except Exception as exc:
        _job_failed(exc, out, record, multirun, params, parent)
        return  # the sweep goes on; MultirunParentRun reports the failure at its end and exits 1
    write_job(out, {**record, "status": "finished", "run_id": run.get("run_id"), "metrics": job_metrics(out)})


def _job_failed(
    exc: Exception, out: Path, record: dict, multirun: bool, params: dict | None, parent: str | None
) -> None:
    """Record a failed job (its job.json, and a FAILED MLflow run in a multirun); a single run exits instead: status 2
    with the message of a PipelineError, the traceback of anything else."""
    from pipeline.base.errors import PipelineError
    from pipeline.outputs.multirun import write_job

    if isinstance(exc, PipelineError):
        error = str(exc)
        log.error("%s", error)
    else:
        error = f"{type(exc).__name__}: {exc}"
        log.exception("job failed")
    write_job(out, {**record, "status": "failed", "error": error})
    if not multirun:
        if isinstance(exc, PipelineError):
            raise SystemExit(2) from None
        raise exc
    record_failed_run(params, parent, record["overrides"], error)


def check_command_line(argv: list[str]) -> None:
    """Before Hydra expands or composes anything: refuse a list of too many weights (in an override or a file of
    conf/), and a multirun (-m) of too many jobs (pipeline.config.limits), with one message and exit 2."""
    import sys

    from hydra.errors import OverrideParseException

    from pipeline.base.errors import PipelineError
    from pipeline.config import limits

    overrides = [arg for arg in argv if "=" in arg and not arg.startswith("-")]
    try:
        limits.check_conf_lists(Path(CONF_DIR))
        limits.check_list_overrides(overrides)
        if "-m" in argv or "--multirun" in argv:
            limits.check_multirun(overrides, default_figures="summary")  # a multirun's default (figure_set_of_job)
    except OverrideParseException:
        pass  # Hydra reports it, with its own message
    except PipelineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


if __name__ == "__main__":
    import gc
    import os
    import sys

    from pipeline.base import stops

    check_command_line(sys.argv[1:])
    os.environ[LAUNCHER_ENV] = str(os.getpid())
    stops.run_app(app)
    gc.freeze()  # no final collection of the jobs' heap (pipeline.stages._cli.stage_main says why)
