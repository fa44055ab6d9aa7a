"""Long loops report progress (pipeline.base.progress): silent when quick, a line every `every` seconds otherwise."""

from __future__ import annotations

import logging

from pipeline.base import progress as progress_module
from pipeline.base.progress import Progress


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_quick_loops_print_nothing_and_slow_ones_a_line_every_few_seconds(monkeypatch, caplog):
    clock = Clock()
    monkeypatch.setattr(progress_module.time, "monotonic", clock)
    caplog.set_level(logging.INFO, logger="pipeline")

    quick = Progress("quick: steps", total=1000, every=5.0)
    for done in range(1, 1001):
        clock.now += 0.001  # 1 s in all: below `every`
        assert quick.update(done) is None
    assert caplog.records == []

    slow = Progress("sweep: sentences", total=100, every=5.0)
    lines = []
    for done in range(1, 101):
        clock.now += 1.0  # 100 s in all: a line every 5 s, none at the end
        line = slow.update(done)
        if line:
            lines.append(line)
    assert len(lines) == 19  # at 5, 10, ..., 95 s (the 100th step is the end: no line)
    assert lines[0] == "sweep: sentences 5/100 (5%), about 95 s left"
    assert [r.getMessage() for r in caplog.records] == lines
