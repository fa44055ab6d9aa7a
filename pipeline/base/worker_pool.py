"""Forked workers (figures, the study's sentences, the length runs): a pool per batch, or after `keep()` one kept warm
for a Hydra multirun's jobs (docs/benchmarks-measurements.md#sweep-caches). concurrent.futures' ProcessPoolExecutor:
a worker that dies (the OOM killer, a stop to the whole process group) fails its batch with one message, where
multiprocessing.Pool waits forever (tests/test_worker_pool.py). Workers run only what they are sent (a kept one draws
the same bytes as a new one), restore the default SIGTERM (submitit's runner traps it) and exit with their parent.
"""

from __future__ import annotations

import collections
import contextlib
import gc
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from itertools import islice

from pipeline.base.errors import PipelineError
from pipeline.base.stops import STOP_SIGNALS

FORK = "fork" in multiprocessing.get_all_start_methods()  # the workers are forked: where fork is not, none start
_keep = False
_kept: tuple[int, ProcessPoolExecutor] | None = None  # (processes, the pool) while kept


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity: a container's or a cluster job's share)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def keep() -> None:
    """Keep pools for the life of this process (a Hydra multirun's); at its exit concurrent.futures ends them."""
    global _keep
    _keep = True


@contextlib.contextmanager
def pool(processes: int) -> Iterator[ProcessPoolExecutor]:
    """A fork pool of `processes` workers for one batch: new and ended after it, or the kept one (keep()). A failed or
    interrupted batch stops the workers at once, their tasks dropped (a kept pool starts afresh)."""
    global _kept
    if _kept is not None and _kept[0] != processes:
        _end_kept()
    current = _kept[1] if _kept is not None else _start(processes)
    if _keep:
        _kept = (processes, current)
    try:
        yield current
    except BaseException as exc:
        _kept = None  # the kept pool is `current` when there is one: the next batch starts afresh
        _end(current, failed=True)
        if isinstance(exc, BrokenProcessPool):
            raise PipelineError(
                "a worker process ended abruptly (killed: out of memory, or by a signal to the whole process group). "
                "Fix: free memory or use fewer workers (figures.workers, length.workers), then run again"
            ) from None
        raise
    if not _keep:
        _end(current)


@contextlib.contextmanager
def imap(function: Callable, items: Iterable, processes: int) -> Iterator[Iterator]:
    """function(item) for each of `items`, in order, as an iterator: by `processes` forked workers (`pool`), two items a
    worker sent ahead (the first on entry), or lazily in this process when processes < 1 or fork is unavailable."""
    if processes < 1 or not FORK:
        yield map(function, items)
        return
    with pool(processes) as workers:
        items = iter(items)
        yield _in_order(workers, function, items, [workers.submit(function, i) for i in islice(items, 2 * processes)])


def _in_order(workers: ProcessPoolExecutor, function: Callable, items: Iterator, sent: list) -> Iterator:
    queue = collections.deque(sent)
    while queue:
        oldest = queue.popleft()
        queue.extend(workers.submit(function, item) for item in islice(items, 1))
        yield oldest.result()


def _start(processes: int) -> ProcessPoolExecutor:
    # gc.freeze() right before fork(), as Python's gc docs say (docs/benchmarks-measurements.md#process-start-and-exit)
    gc.freeze()
    # forked with the stop signals blocked until _worker_start sets its own (a starting worker would run ours)
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, [getattr(signal, name) for name in STOP_SIGNALS])
    try:
        start = (os.getpid(), mask)
        context = multiprocessing.get_context("fork")
        workers = ProcessPoolExecutor(processes, mp_context=context, initializer=_worker_start, initargs=start)
        workers.submit(int).result()  # forks every worker now (at the first task), before the caller imports torch
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        gc.unfreeze()
    return workers


def _worker_start(parent: int, mask: set) -> None:
    """A worker ends at once on SIGTERM or SIGHUP, and within a second of its parent (kill -9 included: no task can
    come); Ctrl-C, which reaches the whole process group, is left to the parent, which ends its pool."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=_exit_with, args=(parent,), daemon=True).start()
    signal.pthread_sigmask(signal.SIG_SETMASK, mask)


def _exit_with(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(1)


def _end(current: ProcessPoolExecutor, failed: bool = False) -> None:
    """The workers finish what they were sent and exit; after a failure they are stopped at once, else a stop waits for
    their running tasks (docs/reliability.md#sweeps-stop-cleanly: a length run's training)."""
    if failed:  # the executor's own processes: no public way to stop them before Python 3.14's terminate_workers()
        for worker in list((current._processes or {}).values()):
            worker.terminate()
    current.shutdown(wait=True, cancel_futures=failed)


def _end_kept() -> None:
    global _kept
    if _kept is not None:
        kept, _kept = _kept[1], None
        _end(kept)
