"""The SLURM launcher of `hydra/launcher=slurm`: hydra-submitit-launcher's, with job states from `squeue`
when `sacct` does not answer.

submitit follows its jobs with `sacct`, which needs SLURM accounting (slurmdbd). Many small clusters, and the
single-node one `.ci/slurm-up.sh` starts, run without it: then every poll prints `sacct`'s "accounting storage
is disabled" and a submitit warning three times over, and a job SLURM ends without a result file (cancelled,
over its time limit, out of memory) is never seen as done, so the sweep waits forever. This watcher asks
`sacct` once; if it fails, it says so in one line and reads the states from `squeue --states=all` (which
lists jobs for a few minutes after they end); a job neither lists has ended. submitit then reports such a
job as failed, with its log files.
"""

from __future__ import annotations

import logging
import subprocess
import time

from hydra_plugins.hydra_submitit_launcher import submitit_launcher

log = logging.getLogger("pipeline")


def _watcher_class():
    from submitit.slurm.slurm import SlurmInfoWatcher

    class QuietSlurmWatcher(SlurmInfoWatcher):
        """SlurmInfoWatcher that falls back to squeue, once and quietly, when sacct fails."""

        sacct_answers: bool | None = None  # unknown until the first poll

        def update(self) -> None:
            command = self._make_command()  # sacct ... -j <ids of unfinished jobs>, None if none
            if command is None:
                return
            self._num_calls += 1
            info = None
            if self.sacct_answers is not False:
                try:
                    done = subprocess.run(command, capture_output=True, timeout=60, check=True)
                    info, self.sacct_answers = self.read_info(done.stdout), True
                except (OSError, subprocess.SubprocessError) as exc:
                    if self.sacct_answers is None:
                        why = exc.stderr.decode(errors="replace").strip() if getattr(exc, "stderr", None) else exc
                        log.info("sacct does not answer (%s): following the jobs with squeue", why)
                    self.sacct_answers = False
            if info is None:
                info = self._from_squeue(command)
            self._info_dict.update(info)
            self._last_status_check = time.time()
            for job_id in self._registered - self._finished:
                if self.is_done(job_id, mode="cache"):
                    self._finished.add(job_id)

        def _from_squeue(self, command: list[str]) -> dict[str, dict[str, str]]:
            """{job id: {"State": ...}} of the polled jobs; one squeue no longer lists is ENDED."""
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
                return {}
            listed = dict(line.split(None, 1) for line in out.splitlines() if " " in line)
            polled = {command[i + 1] for i, arg in enumerate(command) if arg == "-j"}
            return {
                job_id: {"State": listed.get(job_id, "ENDED").strip()}
                for job_id in self._registered - self._finished
                if job_id.split("_")[0] in polled
            }

    return QuietSlurmWatcher


class SlurmLauncher(submitit_launcher.SlurmLauncher):
    """hydra-submitit-launcher's SlurmLauncher (same config), its jobs followed by `QuietSlurmWatcher`."""

    def launch(self, job_overrides, initial_job_idx):
        from submitit.slurm.slurm import SlurmJob

        watcher = _watcher_class()
        if type(SlurmJob.watcher).__name__ != watcher.__name__:
            SlurmJob.watcher = watcher(delay_s=600)  # a class attribute: every SlurmJob of this process polls here
        return super().launch(job_overrides, initial_job_idx)
