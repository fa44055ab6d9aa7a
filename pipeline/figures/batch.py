"""Drawing many figures at once: `Batch` queues figure jobs and draws them in this process or in forked workers,
linking a sweep's earlier drawing of the same job from its cache (pipeline.figures.cache)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from pipeline.base.progress import Progress
from pipeline.figures import drawing  # noqa: F401 (imported before the workers fork: each starts with pyplot loaded)


class Batch:
    """Figure jobs, drawn in this process (workers=1) or by forked workers. A job is a function and its arguments;
    it draws one figure (or several, and returns their names). Workers are forked, so they start with matplotlib
    already imported; a job gets plain arrays and only draws (numpy and matplotlib). Workers take jobs one at a time
    in the order queued: queue the longest first. Output is the same whatever the number of workers.

    `run(workers)` draws the jobs queued so far. Inside `drawing(workers)` each job goes to the workers as it is
    queued, so that they draw while this process computes the next job's data (the encode stage: enter it before
    importing torch, so that the workers are forked small and before any torch thread exists).

    With `cache` (a sweep's pipeline.figures.cache folder), a job (`add`, in `run`) whose arguments an earlier
    job of the sweep had, with its outputs in `out` at the same names, links that job's figures instead of drawing
    them.
    """

    def __init__(self, out: Path | None = None, cache: Path | None = None) -> None:
        self.out, self.cache = out, cache
        self.jobs: list[tuple] = []
        self._pool = None  # inside drawing(): the workers' pool
        self._sent: list = []  # inside drawing(): each job's pending result, in the order queued

    @property
    def forked(self) -> bool:
        """Whether forked workers are drawing the jobs as they are queued (inside drawing(), with workers)."""
        return self._pool is not None

    def add(self, draw, *args, **kwargs) -> None:
        self.jobs.append((draw, args, kwargs))
        if self._pool is not None:
            self._sent.append(self._pool.apply_async(_draw, (self.jobs[-1],)))

    @contextlib.contextmanager
    def drawing(self, workers: int, what: str = "figures") -> Iterator[list]:
        """Draw every job queued inside the block as it is queued (by min(workers, cores) forked workers, started
        on entry), and wait for them at its end; yields the list that then holds their results, in the order queued.
        One worker: the jobs are drawn at the block's end, in this process. An error inside the block or in a job
        ends the workers."""
        from pipeline.base import worker_pool

        results: list = []
        workers = min(workers, worker_pool.usable_cores())
        if workers < 2 or not worker_pool.fork_available():
            yield results
            results += self.run(1, what)
            return
        with worker_pool.pool(workers) as pool:
            self._pool, self._sent = pool, []
            try:
                for job in self.jobs:  # queued before the block
                    self._sent.append(pool.apply_async(_draw, (job,)))
                yield results
                progress = Progress(what, len(self._sent))
                for done, sent in enumerate(self._sent, 1):
                    results.append(sent.get())
                    progress.update(done)
            finally:
                self._pool, self._sent = None, []

    def run(self, workers: int, what: str = "figures") -> list:
        """Draw every queued job (or link it from the cache); returns their results in the order queued. A draw
        longer than a few seconds logs its progress as `<what> 12/57 (21%), about 30 s left`."""
        results: list = [None] * len(self.jobs)
        to_draw, to_store = list(range(len(self.jobs))), {}
        if self.cache is not None and self.out is not None:
            from pipeline.figures import cache as figure_cache

            for k in list(to_draw):
                keyed = figure_cache.job_key(self.jobs[k], self.out)
                if keyed is None:
                    continue
                entry, outputs = self.cache / keyed[0], keyed[1]
                found, results[k] = figure_cache.restore(entry, outputs)
                if found:
                    to_draw.remove(k)
                else:
                    to_store[k] = entry, outputs
        self._draw_jobs(to_draw, workers, results, Progress(what, len(to_draw)))
        for k, (entry, outputs) in to_store.items():
            figure_cache.store(entry, outputs, results[k])
        return results

    def _draw_jobs(self, indices: list[int], workers: int, results: list, progress: Progress) -> None:
        """Draw the jobs `indices` into `results`, counting each drawn in `progress`."""
        from pipeline.base import worker_pool

        workers = min(workers, len(indices), worker_pool.usable_cores()) if workers > 1 else 0
        with worker_pool.imap(_draw, [self.jobs[k] for k in indices], workers) as drawn:  # in order, as drawn
            for done, (k, result) in enumerate(zip(indices, drawn), 1):
                results[k] = result
                progress.update(done)


def _draw(job: tuple):
    draw, args, kwargs = job
    return draw(*args, **kwargs)
