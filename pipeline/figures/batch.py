"""Drawing many figures at once: `Batch` queues figure jobs and draws them in this process or in forked workers,
restoring a figure drawn before from the same data from the figure cache (pipeline.figures.cache)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from pipeline.base import worker_pool
from pipeline.base.progress import Progress
from pipeline.figures import cache as figure_cache
from pipeline.figures import drawing  # noqa: F401 (imported before the workers fork: each starts with pyplot loaded)


class Batch:
    """Figure jobs, drawn in this process (workers=1) or by forked workers. A job is a function and its arguments;
    it draws one figure (or several, and returns their names) into the paths among its arguments. Workers are
    forked, so they start with matplotlib already imported; a job gets plain arrays and only draws (numpy and
    matplotlib). Workers take jobs one at a time in the order queued: queue the longest first. Output is the same
    whatever the number of workers.

    `run(workers)` draws the jobs queued so far. Inside `drawing(workers)` each job goes to the workers as it is
    queued, so that they draw while this process computes the next job's data (the encode stage: enter it before
    importing torch, so that the workers are forked small and before any torch thread exists).

    With `cache` (a pipeline.figures.cache folder), a job whose key (what it draws from, and the code that draws) is
    there gets its figures copied from there instead of drawn, and a job drawn is stored there.
    """

    def __init__(self, cache: Path | None = None) -> None:
        self.cache = cache
        self.jobs: list[tuple] = []
        self.drawn = 0  # jobs drawn (not restored from the cache)
        self._pool = None  # inside drawing(): the workers' pool
        self._sent: list = []  # inside drawing(): each job's result getter, in the order queued
        self._keys: dict[int, tuple] = {}  # job index -> (cache entry, outputs) to store once drawn

    @property
    def forked(self) -> bool:
        """Whether forked workers are drawing the jobs as they are queued (inside drawing(), with workers)."""
        return self._pool is not None

    def add(self, draw, *args, **kwargs) -> None:
        self.jobs.append((draw, args, kwargs))
        if self._pool is not None:
            self._send(len(self.jobs) - 1)

    def _send(self, k: int) -> None:
        """Inside drawing(): job k restored from the cache, or sent to the workers."""
        found, result = self._restore(k)
        self._sent.append((lambda: result) if found else self._pool.submit(_draw, self.jobs[k]).result)

    def _restore(self, k: int) -> tuple[bool, object]:
        """(True, its result) when job k's figures are in the cache (copied into place); else (False, None), and the
        job is noted to be stored once drawn."""
        keyed = figure_cache.job_key(self.jobs[k]) if self.cache is not None else None
        found, result = figure_cache.restore(self.cache / keyed[0], keyed[1]) if keyed else (False, None)
        if not found:
            self.drawn += 1
            if keyed:
                self._keys[k] = self.cache / keyed[0], keyed[1]
        return found, result

    def _store(self, k: int, result) -> None:
        if k in self._keys:
            figure_cache.store(*self._keys.pop(k), result)

    @contextlib.contextmanager
    def drawing(self, workers: int, what: str = "figures") -> Iterator[list]:
        """Draw every job queued inside the block as it is queued (by min(workers, cores) forked workers, started
        on entry), and wait for them at its end; yields the list that then holds their results, in the order queued.
        One worker: the jobs are drawn at the block's end, in this process. An error inside the block or in a job
        ends the workers."""
        results: list = []
        workers = min(workers, worker_pool.usable_cores())
        if workers < 2 or not worker_pool.FORK:
            yield results
            results += self.run(1, what)
            return
        with worker_pool.pool(workers) as pool:
            self._pool, self._sent = pool, []
            try:
                for k in range(len(self.jobs)):  # queued before the block
                    self._send(k)
                yield results
                progress = Progress(what, len(self._sent))
                for done, get in enumerate(self._sent, 1):
                    results.append(get())
                    self._store(done - 1, results[-1])
                    progress.update(done)
            finally:
                self._pool, self._sent = None, []

    def run(self, workers: int, what: str = "figures") -> list:
        """Draw every queued job (or restore it from the cache); returns their results in the order queued. A draw
        longer than a few seconds logs its progress as `<what> 12/57 (21%), about 30 s left`."""
        results: list = [None] * len(self.jobs)
        to_draw = []
        for k in range(len(self.jobs)):
            found, results[k] = self._restore(k)
            if not found:
                to_draw.append(k)
        progress = Progress(what, len(to_draw))
        workers = min(workers, len(to_draw), worker_pool.usable_cores()) if workers > 1 else 0
        with worker_pool.imap(_draw, [self.jobs[k] for k in to_draw], workers) as drawn:  # in order, as drawn
            for done, (k, result) in enumerate(zip(to_draw, drawn), 1):
                results[k] = result
                self._store(k, result)
                progress.update(done)
        return results


def _draw(job: tuple):
    draw, args, kwargs = job
    return draw(*args, **kwargs)
