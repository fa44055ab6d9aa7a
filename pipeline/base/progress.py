"""Progress of a long loop as log lines: nothing when the loop is quick, a line every few seconds when it is not.

    progress = Progress("sweep: sentences", total=len(sentences))
    for i, sentence in enumerate(sentences):
        ...
        progress.update(i + 1)

A line reads `sweep: sentences 1200/10000 (12%), about 41 s left`, logged on the "pipeline" logger at INFO, at most
every `every` seconds and never before `every` seconds have passed, so that short runs print nothing extra.
"""

from __future__ import annotations

import logging
import time


class Progress:
    def __init__(self, what: str, total: int, every: float = 5.0, log: logging.Logger | None = None) -> None:
        self.what, self.total, self.every = what, total, every
        self.log = log or logging.getLogger("pipeline")
        self.started = self.last = time.monotonic()

    def update(self, done: int) -> str | None:
        """Record that `done` of `total` steps are done; returns the line logged, if one was."""
        now = time.monotonic()
        if done >= self.total or now - self.last < self.every or done <= 0:
            return None
        self.last = now
        left = (now - self.started) / done * (self.total - done)
        line = f"{self.what} {done}/{self.total} ({100 * done / self.total:.0f}%), about {left:.0f} s left"
        self.log.info(line)
        return line
