"""The SLURM launcher of `hydra/launcher=slurm`: hydra-submitit-launcher's, its jobs followed with `squeue`.

hydra-submitit-launcher waits on each job with submitit's `job.results()`, and submitit learns a job's state
from `sacct`, which needs SLURM accounting (slurmdbd). Many small clusters, and the single-node one
`.ci/slurm-up.sh` starts, run without it: then every poll prints a submitit warning, and a job SLURM ends without
a result file (cancelled, over its time limit, out of memory, killed) is never seen as done, so the sweep waits
forever. This launcher submits the jobs as hydra-submitit-launcher does (same config, submitit's public executor
API), then waits on them itself: a job is done when its result file exists (then `job.results()` reads it
without asking SLURM), and ended without a result when `squeue --states=all` (which lists jobs for a few minutes
after they end) no longer lists it running; the sweep then stops with an error naming the job's logs. A stop signal
to the sweep (Ctrl-C, SIGTERM, SIGHUP) cancels its jobs (submitit's `job.cancel`, scancel) before it ends.
"""

from __future__ import annotations

import logging
import os
import subprocess
import time
from pathlib import Path
from typing import Any, Sequence

from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, filter_overrides
from hydra_plugins.hydra_submitit_launcher import submitit_launcher
from hydra_plugins.hydra_submitit_launcher.config import BaseQueueConf
from omegaconf import OmegaConf

log = logging.getLogger("pipeline")

POLL_S = 5.0  # how often squeue is asked while jobs run
# squeue states of a job that may still write its result (submitit requeues a preempted or timed-out job itself)
LIVE = {"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "REQUEUED", "REQUEUE_HOLD", "RESIZING", "SUSPENDED"}
LIVE |= {"STAGE_OUT", "SIGNALING", "STOPPED", "PREEMPTED"}


class SlurmJobEnded(RuntimeError):
    """A SLURM job ended without writing its result."""


class SlurmLauncher(submitit_launcher.SlurmLauncher):
    """hydra-submitit-launcher's SlurmLauncher (same config); waits on its jobs with squeue, not sacct."""

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        import sys

        from pipeline.base.errors import PipelineError
        from pipeline.base.stops import Interrupted

        try:
            jobs = self._submit(job_overrides, initial_job_idx)
        except PipelineError as exc:  # Hydra would print any Exception with its traceback; SystemExit passes it
            print(f"error: {exc}", file=sys.stderr)
            raise SystemExit(2) from None
        try:
            wait_for_results(jobs)
        except (KeyboardInterrupt, Interrupted):  # a stop signal: the sweep's jobs are cancelled, not left queued
            for job in jobs:
                job.cancel(check=False)
            raise
        return [job.results()[0] for job in jobs]

    def _submit(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> list:
        """The jobs of the batch as one SLURM array, submitted as hydra-submitit-launcher submits them."""
        import submitit

        check_slurm()
        params = dict(self.params)
        init = {"folder": params.pop("submitit_folder")}
        if "max_num_timeout" in params:
            init["slurm_max_num_timeout"] = params.pop("max_num_timeout")
        executor = submitit.AutoExecutor(cluster="slurm", **init)
        base = set(OmegaConf.structured(BaseQueueConf).keys())
        executor.update_parameters(**{key if key in base else f"slurm_{key}": value for key, value in params.items()})
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        sweep_dir.mkdir(parents=True, exist_ok=True)
        if "mode" in self.config.hydra.sweep:
            os.chmod(sweep_dir, mode=int(str(self.config.hydra.sweep.mode), 8))
        log.info("Submitit 'slurm' sweep output dir : %s", sweep_dir)
        args = []
        for idx, overrides in enumerate(job_overrides, start=initial_job_idx):
            log.info("\t#%d : %s", idx, " ".join(filter_overrides(overrides)))
            args.append((list(overrides), "hydra.sweep.dir", idx, f"job_id_for_{idx}", Singleton.get_state()))
        return submit_array(executor, self, args)


FIX = (
    "run the sweep on a SLURM login node, or locally with hydra/launcher=basic (one job after another) or "
    "hydra/launcher=parallel"
)


def check_slurm() -> None:
    """SLURM's commands are here (submitit's executor needs `srun`, submitting needs `sbatch`), else one message."""
    import shutil

    from pipeline.base.errors import PipelineError

    missing = [command for command in ("srun", "sbatch") if shutil.which(command) is None]
    if missing:
        names = " and ".join(f"`{command}`" for command in missing)
        raise PipelineError(f"hydra/launcher=slurm: {names} not on PATH (SLURM is not installed here): {FIX}")


def submit_array(executor: Any, function: Any, args: list) -> list:
    """executor.map_array, with a SLURM that refuses the jobs (no controller, a wrong partition) as one message
    naming the fix (submitit's traceback only quotes sbatch's stderr)."""
    from submitit.core.utils import FailedJobError

    from pipeline.base.errors import PipelineError

    try:
        return executor.map_array(function, *zip(*args))
    except FailedJobError as exc:
        reason = " ".join(str(exc).split())
        raise PipelineError(f"hydra/launcher=slurm: SLURM did not take the jobs ({reason}): {FIX}") from None


def wait_for_results(jobs: Sequence[Any]) -> None:
    """Return once every job has its result file; raise SlurmJobEnded for a job squeue no longer lists as live
    (twice in a row: its result may still be on its way) while it has none."""
    pending, gone = list(jobs), set()
    while pending:
        time.sleep(POLL_S)
        pending = [job for job in pending if not job.paths.result_pickle.exists()]
        states = squeue_states()
        if states is None:
            continue
        for job in pending:
            state = states.get(job.job_id, "ENDED")
            if state in LIVE:
                gone.discard(job.job_id)
            elif job.job_id in gone and not job.paths.result_pickle.exists():
                raise SlurmJobEnded(
                    f"SLURM job {job.job_id} ended ({state}) without a result (killed, cancelled, over its time or "
                    f"memory limit?): see its logs {job.paths.stderr} and {job.paths.stdout}"
                )
            else:
                gone.add(job.job_id)


def squeue_states() -> dict[str, str] | None:
    """{job id: state} of the jobs squeue lists (array tasks one by one); None when squeue fails."""
    try:
        out = subprocess.run(
            ["squeue", "-h", "-r", "--states=all", "-o", "%i %T"],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        log.warning("squeue failed (%s): job states unknown until the next poll", exc)
        return None
    return dict(line.split(None, 1) for line in out.split("\n") if " " in line)
