"""Memory on a torch device: what a new allocation may take there, and a clear refusal before one that cannot fit.

`available_memory(device)`:
    cuda   the driver's free memory (torch.cuda.mem_get_info) once torch's caching allocator has handed back what
           it holds unused (torch.cuda.empty_cache): a cached block serves only requests it can hold, so counting
           the cache as free let a 69 GiB result fail on an H200 with 1 GiB cached in small blocks
    cpu    MemAvailable of /proc/meminfo (Linux), else the free physical pages (os.sysconf)
    other  None: unknown (MPS shares the machine's memory in ways torch does not report), nothing is refused
`memory_cap(nbytes)` lowers it for the code inside (a smaller device than the one at hand: tests, a shared GPU).
`check_fits(nbytes, device, what, fix)` raises PipelineError, naming the sizes, the cause and the fix, when
nbytes plus RESERVE exceed what is available, so that the user meets one message instead of an allocator's
out-of-memory traceback.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from typing import Iterator

import torch

from pipeline.base.errors import PipelineError

# Kept free beside an estimated peak: the allocator's rounding (2 MiB segments on CUDA) and what libraries allocate
# meanwhile (cuBLAS workspaces, small temporaries the estimates leave out).
RESERVE = 64 * 2**20

_cap: list[int] = []  # the innermost memory_cap, if any


def _meminfo_available() -> int | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


def available_memory(device: torch.device | str | None) -> int | None:
    """Bytes a new allocation may take on `device` now (see the module doc); None when unknown."""
    device = torch.device(device or "cpu")
    if device.type == "cuda":
        torch.cuda.empty_cache()
        measured, _ = torch.cuda.mem_get_info(device)
    elif device.type == "cpu":
        measured = _meminfo_available()
    else:
        measured = None
    if _cap:
        return _cap[-1] if measured is None else min(measured, _cap[-1])
    return measured


@contextmanager
def memory_cap(nbytes: int) -> Iterator[None]:
    """Inside the block, every device offers at most `nbytes` (available_memory, check_fits)."""
    _cap.append(int(nbytes))
    try:
        yield
    finally:
        _cap.pop()


def size_text(nbytes: float) -> str:
    """MiB below a GiB, GiB above."""
    return f"{nbytes / 2**20:.1f} MiB" if abs(nbytes) < 2**30 else f"{nbytes / 2**30:.2f} GiB"


def check_fits(nbytes: int, device: torch.device | str | None, what: str, fix: str) -> None:
    """Raise PipelineError when `what` (its estimated peak `nbytes`) does not fit on `device` now."""
    available = available_memory(device)
    if available is not None and nbytes + RESERVE > available:
        raise PipelineError(
            f"{what}: {size_text(nbytes)} needed on {torch.device(device or 'cpu')}, more than the "
            f"{size_text(max(0, available - RESERVE))} it can take now ({size_text(available)} free, less "
            f"{size_text(RESERVE)} kept for the allocator and libraries). Fix: {fix}"
        )
