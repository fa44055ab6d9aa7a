"""Forked worker processes (figure drawing): a pool per batch of work, or one kept for the process's life.

A DVC stage draws its figures once and exits, so its pool starts and ends with the batch. A Hydra multirun
runs its jobs one after another in one process (the basic launcher): a pool per job would fork the job's
process (torch and MLflow loaded) at every point, and every new worker would draw its first figure cold
(fonts, glyph and text-layout caches): about a third of a point's drawing time. After `keep()`, the pool
outlives the batch: forked at the first batch, warm from the second, and ended when the process exits.

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
from collections.abc import Iterator
from multiprocessing.pool import Pool

_keep = False
_kept: tuple[int, Pool] | None = None  # (processes, the pool) while kept


def fork_available() -> bool:
    return "fork" in multiprocessing.get_all_start_methods()


def keep() -> None:
    """Keep pools for the life of this process (a process that runs many batches, e.g. a Hydra multirun)."""
    global _keep
    if not _keep:
        # registered after multiprocessing's own exit handler (imported above), so it runs first (atexit is last
        # in, first out): the workers finish and exit before multiprocessing would terminate them
        atexit.register(_end_kept)
    _keep = True


def kept_pool() -> Pool | None:
    """The pool kept for this process, if any (for tests)."""
    return _kept[1] if _kept else None


@contextlib.contextmanager
def pool(processes: int) -> Iterator[Pool]:
    """A fork pool of `processes` workers for one batch: new and ended after it, or the kept one (see keep())."""
    global _kept
    if not _keep:
        with fresh_pool(processes) as current:
            yield current
        return
    if _kept is not None and _kept[0] != processes:
        _end_kept()
    if _kept is None:
        _kept = (processes, _start(processes))
    current = _kept[1]
    try:
        yield current
    except BaseException:
        # a failed or interrupted batch may leave work queued in the workers: end them (the next batch starts afresh)
        _kept = None
        _end(current, failed=True)
        raise


@contextlib.contextmanager
def fresh_pool(processes: int) -> Iterator[Pool]:
    """A new fork pool of `processes` workers, ended after the batch even while pools are kept (for work other than
    the kept pool's, which should not fork it early: composing a sweep's configs before its first job)."""
    current = _start(processes)
    try:
        yield current
    except BaseException:
        _end(current, failed=True)
        raise
    _end(current)


def _start(processes: int) -> Pool:
    # Python's gc docs: gc.freeze() right before fork(), so that the workers' collections never scan (nor touch, and
    # so copy) what they inherit: fewer and shorter full collections in every worker (the encode stage: 0.4 s CPU of
    # 10, measured)
    gc.freeze()
    try:
        return multiprocessing.get_context("fork").Pool(processes, initializer=_default_sigterm)
    finally:
        gc.unfreeze()


def _default_sigterm() -> None:
    import signal

    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _end(current: Pool, failed: bool = False) -> None:
    """close() + join(): the workers finish their queue and exit; after a failure, terminate() drops the queue."""
    if failed:
        current.terminate()
    else:
        current.close()
    current.join()


def _end_kept() -> None:
    global _kept
    if _kept is not None:
        kept, _kept = _kept[1], None
        _end(kept)
