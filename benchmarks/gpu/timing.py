"""Timing on a device: wall time with the device's queue drained, best of a few runs after a warm-up, and the
failures a measurement may meet (a PipelineError refusal, an allocator's out-of-memory) kept as text."""

from __future__ import annotations

import time
from typing import Callable

import torch

from benchmarks.gpu.budget import Budget
from pipeline.base.errors import PipelineError
from pipeline.core.device import synchronize

SHORT, LONG = 0.5, 2.0
QUICK_RUNS, QUICK_SPENT = 50, 0.2


def run_once(fn: Callable[[], object], device: torch.device) -> tuple[float, object]:
    start = time.perf_counter()
    result = fn()
    synchronize(device)
    return time.perf_counter() - start, result


def timed(
    fn: Callable[[], object], device: torch.device, repeat: int, budget: Budget, keep: float = 0.0
) -> tuple[float, object, int]:
    """(best seconds, the last result, timed runs): a warm-up run, then `repeat` timed runs when it took under
    SHORT seconds (more, up to QUICK_RUNS, while they take under QUICK_SPENT seconds in all: quick calls are noisy),
    one under LONG seconds, none above (the warm-up's one-time costs are then a small share of it: its time is
    returned, runs = 0); each only while one more fits in the budget, leaving `keep` seconds. Only one result is
    alive at a time: the previous one is dropped before the next run."""
    first, result = run_once(fn, device)
    wanted = repeat if first < SHORT else 1 if first < LONG else 0
    best, runs, spent = first, 0, 0.0
    while runs < wanted or (runs < QUICK_RUNS and spent + best < QUICK_SPENT):
        if first > budget.left() - keep:
            break
        result = None
        seconds, result = run_once(fn, device)
        best = seconds if runs == 0 else min(best, seconds)
        spent += seconds
        runs += 1
    return best, result, runs


def out_of_memory(exc: BaseException) -> bool:
    """An allocator's failure: CUDA's OutOfMemoryError or the CPU allocator's RuntimeError."""
    if isinstance(exc, torch.cuda.OutOfMemoryError):
        return True
    text = str(exc)
    return isinstance(exc, RuntimeError) and ("can't allocate memory" in text or "out of memory" in text)


def attempt(fn: Callable[[], object]) -> tuple[object, str | None]:
    """(fn(), None), or (None, why) when the core refused it (PipelineError) or the allocator failed."""
    try:
        return fn(), None
    except PipelineError as exc:
        return None, f"refused: {exc}"
    except RuntimeError as exc:
        if not out_of_memory(exc):
            raise
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        return None, "out of memory: " + str(exc).splitlines()[0]
