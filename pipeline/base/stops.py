"""Stop signals as an exception: a command that must end its work cleanly (put files back, end its runs, stop its
workers) turns SIGINT, SIGTERM and SIGHUP into `Interrupted`, raised in its main thread, and handles it at its end.

    on_stop_signals(raise_interrupted)
    try:
        ...                                  # the work: every `except Exception` lets Interrupted through
    except Interrupted as stop:
        on_stop_signals(signal.SIG_IGN)      # a second Ctrl-C must not cut the cleanup short
        end_descendants()                    # the processes it started, and theirs
        print(f"interrupted by {stop.name}: ...")
        raise SystemExit(stop.status)
"""

from __future__ import annotations

import signal
import sys

STOP_SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP")  # Ctrl-C; kill, timeout, systemd, SLURM, CI; a closed terminal
REDELIVER_AFTER_S = 0.01  # a dropped Interrupted's signal is sent again after this, outside the hook that saw it
END_WAIT_S = 5.0  # how long stopped processes get to exit after SIGTERM before SIGKILL


class Interrupted(BaseException):
    """A stop signal reached the command (a BaseException: no `except Exception` of a library swallows it)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name

    @property
    def status(self) -> int:
        """The exit status of a process a signal ended: 128 + its number (130, 143, 129)."""
        return 128 + self.signum


def on_stop_signals(handler) -> None:
    """`handler` for each stop signal this platform has; with raise_interrupted, an Interrupted that Python drops is
    delivered again (redeliver_dropped)."""
    for name in STOP_SIGNALS:
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), handler)
    if handler is raise_interrupted and sys.unraisablehook is not redeliver_dropped:
        sys.unraisablehook = redeliver_dropped


# the stop signal raise_interrupted saw: a library may turn the Interrupted it raised into an error of its own
received: int | None = None


def raise_interrupted(signum: int, frame) -> None:
    global received
    received = signum
    raise Interrupted(signum)


def redeliver_dropped(unraisable) -> None:
    """sys.unraisablehook: a signal whose handler ran inside a finalizer or a weakref callback (a garbage collection
    can run one between any two bytecodes) raised Interrupted where Python can only print it ("Exception ignored
    in ...") and go on; the signal is sent again a moment later, from another thread, so that its handler runs once
    this hook has returned and its Interrupted reaches the command's main code. Any other unraisable exception is
    printed as Python prints it."""
    if isinstance(unraisable.exc_value, Interrupted):
        import os
        import threading

        resend = threading.Timer(REDELIVER_AFTER_S, os.kill, (os.getpid(), unraisable.exc_value.signum))
        resend.daemon = True
        resend.start()
        return
    sys.__unraisablehook__(unraisable)


def end_descendants(wait: float = END_WAIT_S, spare: tuple[str, ...] = ()) -> int:
    """Stop every process this one started, and theirs (workers, job processes): SIGTERM, then SIGKILL for those
    still alive after `wait` seconds (a job runner may trap SIGTERM). Processes whose command line holds one of
    `spare` are left: helpers that end by themselves when this process exits. Returns how many were stopped."""
    import psutil

    def spared(process: psutil.Process) -> bool:
        try:
            return any(word in part for part in process.cmdline() for word in spare)
        except psutil.Error:
            return False

    processes = [process for process in psutil.Process().children(recursive=True) if not spared(process)]
    for process in processes:
        try:
            process.terminate()
        except psutil.NoSuchProcess:
            pass
    _, alive = psutil.wait_procs(processes, timeout=wait)
    for process in alive:
        try:
            process.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(alive, timeout=wait)
    return len(processes)


def end_command(interrupted: Interrupted) -> None:
    """After a stop signal: end the figure workers and every process the run started (joblib's workers, submitit's
    jobs), then the MLflow runs they left RUNNING and the sweep's parent run, as KILLED; one line, then exit with the
    signal's status."""
    on_stop_signals(signal.SIG_IGN)  # a second Ctrl-C must not cut this short
    # joblib's loky resource tracker ends itself when this process exits; stopped, loky starts another, which prints
    # a traceback for each resource the first one held
    stopped = end_descendants(spare=("resource_tracker",))
    sweeps = sys.modules.get("pipeline.outputs.parent_run")  # imported by Hydra for a multirun's callback
    parents, jobs = sweeps.end_interrupted(interrupted.name) if sweeps else ([], [])
    runs = (
        f"; MLflow: the sweep's parent run {', '.join(parents)} and {len(jobs)} job run(s) ended KILLED"
        if parents
        else ""
    )
    print(
        f"interrupted by {interrupted.name}: stopped the run and the {stopped} process(es) it started{runs}",
        file=sys.stderr,
    )
    raise SystemExit(interrupted.status)


def run_app(app) -> None:
    """app() (a command's Hydra app) with stop signals raised as Interrupted, a stop ended by end_command; Hydra reports
    a stop that OmegaConf hid as an error of its own, and exits: `received` tells that exit from others."""
    on_stop_signals(raise_interrupted)
    try:
        app()
    except (Interrupted, SystemExit):
        if received is None:
            raise
        end_command(Interrupted(received))
