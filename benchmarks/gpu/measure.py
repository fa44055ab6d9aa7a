"""One measured row of the check: a method on a device, timed within the budget, its errors against a float64
reference, what it wrote and at what rate; or why it did not run (skipped by the budget, refused, out of memory)."""

from __future__ import annotations

from typing import Callable

import numpy as np
import torch

from benchmarks.gpu.budget import Budget
from benchmarks.gpu.timing import attempt, timed

COUNTS = {"flipped_signs"}  # error entries that count things, kept out of max_abs_err


def as_np(t) -> np.ndarray:
    return t.detach().cpu().double().numpy() if isinstance(t, torch.Tensor) else np.asarray(t, dtype=np.float64)


def measure(
    rows: list[dict],
    budget: Budget,
    *,
    method: str,
    device: torch.device,
    kind: str,
    work: float,
    fn: Callable[[], object],
    repeat: int,
    keep: float = 0.0,
    errors: Callable[[object], dict[str, float]] | None = None,
    bytes_written: int | None = None,
    **fields,
) -> dict:
    """Append and return one row: `fn` timed on `device` (kind and work feed the budget's cost model), its errors
    (`errors(result)`: name -> max |value - reference|, or a count named in COUNTS) and bandwidth (bytes_written / seconds)."""
    row: dict = {"method": method, "device": str(device), **fields}
    rows.append(row)
    predicted = budget.predict(kind, work)
    cost = None if predicted is None else predicted * (1 if predicted >= 2.0 else 2)  # warm-up (+ a timed run)
    if not budget.allows(f"{method} on {device} {fields}", cost, keep):
        row["skipped"] = f"predicted {cost:.3g} s, {max(0.0, budget.left() - keep):.3g} s left for it"
        return row
    value, failure = attempt(lambda: timed(fn, device, repeat, budget, keep))
    if failure:
        row["failed"] = failure
        return row
    seconds, result, runs = value
    del value
    budget.learn(kind, work, seconds)
    row.update(seconds=seconds, runs=runs)
    if bytes_written:
        row.update(bytes_written=bytes_written, bytes_per_s=bytes_written / seconds)
    if errors is not None:
        found = errors(result)
        row.update(errors=found, max_abs_err=max(v for k, v in found.items() if k not in COUNTS))
    del result
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return row
