"""Forked worker processes (figure drawing): a pool per batch of work, or one kept for the process's life.

A DVC stage draws its figures once and exits, so its pool starts and ends with the batch. A Hydra multirun
runs its jobs one after another in one process (the basic launcher): after `keep()`, the pool outlives the batch:
forked at the first job, warm from the second, and ended when the process exits. Kept for speed
(docs/benchmarks-measurements.md#sweep-caches): each new worker forks the job's process (torch and MLflow loaded) and
draws its first figure cold (fonts, glyph and text-layout caches). Drawing in the job's own process instead
(figures.workers=1) costs the same CPU but draws a point's two panels one after the other.

Workers only run what they are sent (module-level functions and their pickled arguments), so a kept worker
draws the same bytes as a new one. They are ended by close() + join(), never left to a signal: a job runner
that traps SIGTERM (submitit logs "Bypassing signal SIGTERM") passes its handler on to forked workers, so each
worker restores the default handler first, and one whose parent dies exits at its task queue's end of file.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import multiprocessing
import os
from collections.abc import Callable, Iterable, Iterator
from multiprocessing.pool import Pool

_keep = False
_kept: tuple[int, Pool] | None = None  # (processes, the pool) while kept


def fork_available() -> bool:
    return "fork" in multiprocessing.get_all_start_methods()


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity: a container's or a cluster job's share)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def keep() -> None:
    """Keep pools for the life of this process (a process that runs many batches, e.g. a Hydra multirun)."""
    global _keep
    if not _keep:
        # registered after multiprocessing's own exit handler (imported above), so it runs first (atexit is last
        # in, first out): the workers finish and exit before multiprocessing would terminate them
        atexit.register(_end_kept)
    _keep = True


@contextlib.contextmanager
def pool(processes: int) -> Iterator[Pool]:
    """A fork pool of `processes` workers for one batch: new and ended after it, or the kept one (see keep()). A
    failed or interrupted batch may leave work queued in the workers: they are ended (a kept pool starts afresh)."""
    global _kept
    if not _keep:
        current = _start(processes)
    else:
        if _kept is not None and _kept[0] != processes:
            _end_kept()
        if _kept is None:
            _kept = (processes, _start(processes))
        current = _kept[1]
    try:
        yield current
    except BaseException:
        if _kept is not None and _kept[1] is current:
            _kept = None
        _end(current, failed=True)
        raise
    if not _keep:
        _end(current)


@contextlib.contextmanager
def imap(function: Callable, items: Iterable, processes: int) -> Iterator[Iterator]:
    """function(item) for each of `items`, in order, as an iterator: computed by `processes` forked workers (`pool`;
    Pool.imap's feeder blocks while the pipe to them is full, so large items are read little ahead of the workers),
    or lazily in this process when processes < 1 or fork is unavailable."""
    if processes < 1 or not fork_available():
        yield map(function, items)
        return
    with pool(processes) as workers:
        yield workers.imap(function, items, chunksize=1)


def _start(processes: int) -> Pool:
    # Python's gc docs: gc.freeze() right before fork(), so that the workers' collections never scan (nor touch, and
    # so copy) what they inherit: fewer and shorter full collections in every worker
    # (docs/benchmarks-measurements.md#process-start-and-exit)
    gc.freeze()
    try:
        return multiprocessing.get_context("fork").Pool(processes, initializer=_default_sigterm)
    finally:
        gc.unfreeze()


def _default_sigterm() -> None:
    """A worker's signals: SIGTERM ends it at once (a runner's handler is not inherited); Ctrl-C, which reaches the
    whole process group, is left to the parent, which ends its pool (no traceback from each worker)."""
    import signal

    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _end(current: Pool, failed: bool = False) -> None:
    """close() + join(): the workers finish their queue and exit; after a failure, terminate() drops the queue."""
    if failed:
        current.terminate()
    else:
        current.close()
    current.join()


def _end_kept(failed: bool = False) -> None:
    global _kept
    if _kept is not None:
        kept, _kept = _kept[1], None
        _end(kept, failed)


def stop_kept() -> None:
    """End the kept pool now, dropping its queue (a stop signal: the process is ending its work)."""
    _end_kept(failed=True)
