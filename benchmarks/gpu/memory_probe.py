"""The largest n whose full (n, n) float64 dot-product and distance matrices fit on the device, and what a user
asking for more gets.

From the memory available now (pipeline.core.memory.available_memory, under --memory-cap if given) and the core's
estimate of profile_matrices' peak (pipeline.core.encoding.full_matrices_bytes), n_max is the largest n the core's
check lets through. The probe then computes the matrices at n_max for real (they must fit: an out-of-memory there
means the estimate is too low), checks a few entries, measures the peak the allocator saw (CUDA) or the growth of
the process's peak RSS (CPU), and asks for n_max + 1 and 2 n_max, which must each end in one PipelineError naming
the cause and the fix, raised before anything is allocated.
"""

from __future__ import annotations

import math
import resource
import time

import numpy as np
import torch

from benchmarks.gpu.timing import out_of_memory
from pipeline.base.errors import PipelineError
from pipeline.core import encoding as E
from pipeline.core.device import synchronize
from pipeline.core.memory import RESERVE, available_memory

BASE = 10000.0
D = 64  # an even d: the full matrices' memory does not depend on d


def largest_n(available: int, dtype: torch.dtype = torch.float64) -> int:
    """The largest n with full_matrices_bytes(n) + RESERVE <= available (0 if none)."""
    per_entry = 2 * torch.empty(0, dtype=dtype).element_size()  # two (n, n) results: a first guess, refined below
    n = math.isqrt(max(0, available - RESERVE) // per_entry)
    while n > 0 and E.full_matrices_bytes(n, dtype) + RESERVE > available:
        n -= 1
    while E.full_matrices_bytes(n + 1, dtype) + RESERVE <= available:
        n += 1
    return n


def _allocated(device: torch.device) -> int | None:
    return torch.cuda.memory_allocated(device) if device.type == "cuda" else None


def _peak_start(device: torch.device) -> int:
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
        return torch.cuda.memory_allocated(device)
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _peak_growth(device: torch.device, start: int) -> int:
    """Bytes the allocator's peak rose by (CUDA), or the growth of this process's peak RSS (CPU: only meaningful
    when nothing earlier in the process held more)."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) - start
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - start


def at_n_max(n: int, device: torch.device) -> dict:
    """The full matrices at n for real: seconds, peak growth, and entries against the float64 closed form."""
    start = _peak_start(device)
    t0 = time.perf_counter()
    try:
        dot, dist = E.profile_matrices(E.sinusoidal_profiles(n, D, BASE, device), device=device)
        synchronize(device)
    except RuntimeError as exc:  # a PipelineError here is a bug of the estimate's inverse: let it raise
        if not out_of_memory(exc):
            raise
        return {"n": n, "fits": False, "error": str(exc).splitlines()[0]}
    seconds = time.perf_counter() - t0
    k = np.array([0, 1, n // 2, n - 1])
    w = 1.0 / np.power(BASE, np.arange(0, D, 2) / D)
    want_dot = np.cos(k[:, None] * w[None, :]).sum(axis=1)
    want_dist = np.sqrt((4 * np.sin(0.5 * k[:, None] * w[None, :]) ** 2).sum(axis=1))
    got_dot = dot[torch.as_tensor(k, device=device), 0].cpu().numpy()
    got_dist = dist[torch.as_tensor(k, device=device), 0].cpu().numpy()
    err = float(max(np.abs(got_dot - want_dot).max(), np.abs(got_dist - want_dist).max()))
    del dot, dist
    growth = _peak_growth(device, start)
    estimate = E.full_matrices_bytes(n, torch.float64)
    return {
        "n": n,
        "fits": True,
        "seconds": seconds,
        "estimate_bytes": estimate,
        "peak_growth_bytes": growth,
        "peak_over_estimate": growth / estimate,
        "max_abs_err": err,
    }


def beyond(n: int, device: torch.device) -> dict:
    """Ask for the full matrices at n: the expected outcome is a PipelineError, before any allocation."""
    profiles = E.sinusoidal_profiles(n, D, BASE, device)  # O(n): allocated before the count starts
    before = _allocated(device)
    try:
        dot, dist = E.profile_matrices(profiles, device=device)
    except PipelineError as exc:
        after = _allocated(device)
        return {
            "n": n,
            "outcome": "PipelineError",
            "message": str(exc),
            "allocated_before": before,
            "allocated_after": after,
        }
    except RuntimeError as exc:
        if not out_of_memory(exc):
            raise
        return {"n": n, "outcome": "out of memory (no PipelineError)", "message": str(exc).splitlines()[0]}
    del dot, dist
    return {"n": n, "outcome": "computed (no error)"}


def probe(device: torch.device) -> dict:
    """The whole probe on `device`, under whatever memory_cap the caller set."""
    available = available_memory(device)
    if available is None:
        return {"available_bytes": None, "skipped": f"torch reports no free memory for {device.type}"}
    n_max = largest_n(available)
    result = {
        "device": device.type,
        "available_bytes": available,
        "reserve_bytes": RESERVE,
        "n_max": n_max,
        "n_max_float32": largest_n(available, torch.float32),
    }
    result["at_n_max"] = at_n_max(n_max, device)
    if device.type == "cuda":
        torch.cuda.empty_cache()
    result["beyond"] = [beyond(n, device) for n in (n_max + 1, 2 * n_max)]
    result["clear_error_beyond"] = all(
        b["outcome"] == "PipelineError"
        and "Fix:" in b["message"]
        and b.get("allocated_before") == b.get("allocated_after")
        for b in result["beyond"]
    )
    return result
