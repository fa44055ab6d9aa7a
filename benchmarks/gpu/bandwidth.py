"""A device's peak memory bandwidth, two ways: the theoretical one from its properties (CUDA: 2 transfers per
memory clock x the bus width; torch exposes both on recent versions) and a measured device-to-device copy, the
practical peak (a copy reads and writes every byte: 2 x its size / seconds)."""

from __future__ import annotations

import torch

from benchmarks.gpu.budget import Budget
from benchmarks.gpu.timing import timed
from pipeline.core.memory import available_memory


def theoretical_peak(info: dict) -> float | None:
    """Bytes per second from the device description (benchmarks.gpu.devinfo.describe); None when unknown."""
    clock, width = info.get("memory_clock_khz"), info.get("memory_bus_width_bits")
    if not clock or not width:
        return None
    return 2.0 * clock * 1e3 * width / 8.0


def copy_peak(device: torch.device, budget: Budget, max_bytes: int = 2**30) -> dict:
    """Best rate of copying a float32 tensor of up to `max_bytes` (a quarter of the free memory at most) into
    another on the same device."""
    free = available_memory(device)
    nbytes = max_bytes if free is None else max(2**20, min(max_bytes, free // 4))
    src = torch.ones(nbytes // 4, dtype=torch.float32, device=device)
    dst = torch.empty_like(src)
    seconds, result, runs = timed(lambda: dst.copy_(src), device, 5, budget)
    del result
    return {"bytes": nbytes, "seconds": seconds, "runs": runs, "bytes_per_s": 2.0 * nbytes / seconds}
