"""pipeline.core.memory: what a device may still allocate, a cap on it, and the refusal before an allocation that
cannot fit; and the full matrices' estimate that the encoding core checks with it."""

from __future__ import annotations

import sys

import pytest
import torch

from pipeline.base.errors import PipelineError
from pipeline.core import encoding as E
from pipeline.core.memory import RESERVE, available_memory, check_fits, memory_cap, size_text


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/meminfo")
def test_cpu_memory_is_meminfo_available():
    with open("/proc/meminfo", encoding="ascii") as f:
        total = next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemTotal:"))
    assert 0 < available_memory("cpu") <= total


def test_cap_lowers_what_every_device_offers_and_nests():
    measured = available_memory("cpu")
    with memory_cap(2**30):
        assert available_memory("cpu") == min(measured, 2**30)
        assert available_memory("mps") == 2**30  # torch reports nothing for MPS: the cap is all there is
        with memory_cap(2**20):
            assert available_memory(torch.device("cpu")) == 2**20
        assert available_memory("cpu") == min(measured, 2**30)
    assert available_memory("mps") is None


def test_check_fits_refuses_with_the_sizes_and_the_fix():
    with memory_cap(RESERVE + 10 * 2**20):
        check_fits(10 * 2**20, "cpu", "ten MiB", "none needed")
        with pytest.raises(PipelineError) as refused:
            check_fits(10 * 2**20 + 1, "cpu", "the thing", "use less")
    assert str(refused.value) == (
        "the thing: 10.0 MiB needed on cpu, more than the 10.0 MiB it can take now (74.0 MiB free, less 64.0 MiB kept "
        "for the allocator and libraries). Fix: use less"
    )
    assert size_text(3 * 2**30) == "3.00 GiB"


@pytest.mark.parametrize("d", [64, 7])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_full_matrices_estimate_covers_their_results(d, dtype):
    """The estimate is the results' bytes and one copied block for even d, more for odd d (their float64 work), and
    profile_matrices
    computes them whenever estimate + reserve fit, refusing one byte less."""
    n = 300
    estimate = E.full_matrices_bytes(n, dtype, odd=bool(d % 2))
    profiles = E.sinusoidal_profiles(n, d)
    with memory_cap(estimate + RESERVE):
        dot, dist = E.profile_matrices(profiles, dtype)
    results = dot.element_size() * dot.numel() + dist.element_size() * dist.numel()
    block = dot.element_size() * E.toeplitz_block_elements(n)
    assert estimate == results + block if d % 2 == 0 else estimate > results + block
    with memory_cap(estimate + RESERVE - 1), pytest.raises(PipelineError, match=f"full {n} x {n}"):
        E.profile_matrices(profiles, dtype)
