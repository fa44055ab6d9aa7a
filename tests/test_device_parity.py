"""The encoding core on the device under test against the CPU path and float64 references: what `python -m
benchmarks.gpu` runs on a GPU (every test here is marked `cuda`).

The device is PE_TEST_DEVICE (cpu or cuda), else CUDA when torch sees it, else the CPU: on a CPU-only machine the
comparisons with the CPU path hold by construction and the ones with the independent references (numpy float64,
exact arithmetic) carry the test. The bars: the float32 encoding bit-identical (its angles are float64, rounded
once); diagnostics, profiles, matrices, RoPE and the projections within RELATIVE = 1e-6 of the CPU path, relative to
each array's largest magnitude; PCA signs identical; ALiBi exact (its values are exact in float64). Each test records
its largest difference (record_property), which the GPU check writes to its JSON.

Imports only torch, numpy, scipy, pytest and the core (a bare GPU machine has nothing else).
"""

from __future__ import annotations

import os
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from benchmarks.sweep import torch_weighted_pca
from conftest import interleaved_columns, position_norms
from pipeline.base.errors import PipelineError
from pipeline.core import alibi, relative, rope
from pipeline.core import encoding as E
from pipeline.core.device import resolve_device
from pipeline.core.memory import memory_cap
from pipeline.core.projection import weighted_pca

DEVICE = resolve_device(os.environ.get("PE_TEST_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu"))
CPU = torch.device("cpu")
RELATIVE = 1e-6
pytestmark = pytest.mark.cuda


def as_np(t) -> np.ndarray:
    return t.detach().cpu().double().numpy() if isinstance(t, torch.Tensor) else np.asarray(t, dtype=np.float64)


def relative_difference(got, want) -> float:
    """max |got - want| / max |want| over the finite entries; the non-finite ones (ALiBi's -inf) must match."""
    got, want = as_np(got), as_np(want)
    assert got.shape == want.shape, f"shapes {got.shape} and {want.shape}"
    finite = np.isfinite(want)
    assert np.array_equal(got[~finite], want[~finite]), "non-finite entries differ"
    if not finite.any():
        return 0.0
    scale = np.abs(want[finite]).max() or 1.0
    return float(np.abs(got[finite] - want[finite]).max() / scale)


def on_both(fn):
    """fn(DEVICE), fn(CPU): the device's result and the CPU path's."""
    return fn(DEVICE), fn(CPU)


def assert_close(record_property, name: str, got, want, bar: float = RELATIVE) -> None:
    diff = relative_difference(got, want)
    record_property(name, diff)
    assert diff <= bar, f"{name}: relative difference {diff:.3g} > {bar:g} on {DEVICE}"


def reference_pe(positions: np.ndarray, d: int, base: float = 1e4) -> np.ndarray:
    """The interleaved encoding in numpy float64."""
    w = 1.0 / np.power(base, np.arange(0, d, 2) / d)
    angle = positions[:, None].astype(np.float64) * w[None, :]
    out = np.empty((len(positions), d))
    out[:, 0::2], out[:, 1::2] = np.sin(angle), np.cos(angle[:, : d // 2])
    return out


# ---------------------------------------------------------------- the encoding


@pytest.mark.parametrize("layout", ["interleaved", "concatenated"])
@pytest.mark.parametrize("d", [64, 51])
@pytest.mark.parametrize("start", [0, 999_000])
def test_float32_encoding_is_bit_identical(layout, d, start, record_property):
    """float32 from float64 angles: the device's bits are the CPU's, and those are the float64 reference rounded once
    (within half a float32 ulp of numbers <= 1, plus the reference's own angle error)."""
    gpu, cpu = on_both(lambda dev: E.sinusoidal_encoding(2100, d, start=start, layout=layout, device=dev))
    assert gpu.device.type == DEVICE.type and gpu.dtype == torch.float32
    bits_gpu, bits_cpu = gpu.cpu().view(torch.int32), cpu.view(torch.int32)
    differ = int((bits_gpu != bits_cpu).sum())
    ulps = int((bits_gpu.long() - bits_cpu.long()).abs().max())
    record_property("differing_values", differ)
    assert differ == 0, f"{differ} of {cpu.numel()} float32 values differ from the CPU's, by up to {ulps} ulp"
    ref = reference_pe(np.arange(start, start + 2100), d)[:, interleaved_columns(d, layout).numpy()]
    err = np.abs(cpu.double().numpy() - ref).max()
    record_property("max_abs_err_vs_float64", float(err))
    # the reference's angles are off by (P + 2) eps p where the machine's numpy power kernel is P ulp off (an ulp
    # or two), ours by an ulp: 8 eps p (16 units of 2^-53) covers P up to 6, far below the half ulp 2^-25
    assert err <= 2.0**-25 + 16 * 2.0**-53 * (start + 2100)


def test_float64_encoding_and_frequencies(record_property):
    gpu, cpu = on_both(lambda dev: E.sinusoidal_encoding(3000, 128, start=500_000, device=dev, dtype=torch.float64))
    assert_close(record_property, "encoding_float64", gpu, cpu, 1e-13)
    gpu, cpu = on_both(lambda dev: E.inverse_frequencies(4096, 1e4, dev))
    assert_close(record_property, "inverse_frequencies", gpu, cpu, 1e-15)
    offsets = torch.arange(1, 200)
    gpu, cpu = on_both(lambda dev: E.offset_distance_closed_form(offsets.to(dev), 100, 1e4))
    assert_close(record_property, "offset_distance_closed_form", gpu, cpu)


# ---------------------------------------------------------------- profiles and full matrices


@pytest.mark.parametrize("d", [64, 51, 4096])
def test_profiles(d, record_property):
    """The 1-D profiles on the device against the CPU path, and against their float64 definitions in numpy."""
    n = 5000
    gpu, cpu = on_both(lambda dev: E.sinusoidal_profiles(n, d, 1e4, dev))
    assert gpu.dot.device.type == DEVICE.type
    assert_close(record_property, "dot", gpu.dot, cpu.dot)
    assert_close(record_property, "dist2", gpu.dist2, cpu.dist2)
    if d % 2:
        assert_close(record_property, "unpaired", gpu.unpaired, cpu.unpaired)
    w = 1.0 / np.power(1e4, np.arange(0, d, 2) / d)[: d // 2]
    k = np.arange(n, dtype=np.float64)[:, None]
    # numpy's reference moves by machine by ~4 eps k sum(w) (angles off with the power kernel): below 1e-12 of the
    # largest value d / 2 at every d here
    assert_close(record_property, "dot_vs_numpy", gpu.dot, np.cos(k * w).sum(axis=1), 1e-9)


@pytest.mark.parametrize("d", [64, 51])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_profile_matrices(d, dtype, record_property):
    """Full matrices from the profiles on the device: the CPU path's, symmetric, with an exact zero diagonal."""
    gpu, cpu = on_both(lambda dev: E.profile_matrices(E.sinusoidal_profiles(700, d, 1e4, dev), dtype, dev))
    for name, g, c in zip(("dot", "distance"), gpu, cpu):
        assert g.device.type == DEVICE.type and g.dtype == dtype
        assert_close(record_property, name, g, c)
        assert torch.equal(g, g.T), name
    assert not gpu[1].diagonal().any()


@pytest.mark.parametrize("d", [64, 51])
def test_profile_block_means(d, record_property):
    gpu, cpu = on_both(lambda dev: E.profile_block_means(E.sinusoidal_profiles(1000, d, 1e4, dev), 8))
    assert_close(record_property, "dot_blocks", gpu[0], cpu[0])
    assert_close(record_property, "distance_blocks", gpu[1], cpu[1])


# ---------------------------------------------------------------- the generic path and the diagnostics


def learned(n: int = 600, d: int = 48) -> torch.Tensor:
    """A seeded random float32 table, as a learned encoding."""
    return torch.randn(n, d, generator=torch.Generator().manual_seed(0))


def test_generic_path(record_property):
    """Norms, Gram and distance matrices, block means and the offset band of any matrix."""
    x = learned()
    for name, fn in {
        "norms": position_norms,
        "dot": E.dot_product_matrix,
        "distance": E.distance_matrix,
        "band_gram": lambda t: E.band_gram(t, 20),
    }.items():
        gpu, cpu = fn(x.to(DEVICE)), fn(x)
        assert gpu.device.type == DEVICE.type
        assert_close(record_property, name, gpu, cpu)
    (dot_g, dist_g), (dot_c, dist_c) = E.block_means(x.to(DEVICE), 6), E.block_means(x, 6)
    assert_close(record_property, "dot_blocks", dot_g, dot_c)
    assert_close(record_property, "distance_blocks", dist_g, dist_c)
    (lo_g, hi_g), (lo_c, hi_c) = E.offset_distances(x.to(DEVICE), 20), E.offset_distances(x, 20)
    assert_close(record_property, "offset_lo", lo_g, lo_c)
    assert_close(record_property, "offset_hi", hi_g, hi_c)


@pytest.mark.parametrize("d", [64, 51])
def test_diagnostics(d, record_property):
    """Every field of sinusoidal_diagnostics (block means) and matrix_diagnostics (full matrices)."""
    pe = E.sinusoidal_encoding(1000, d)
    cases = {
        "sinusoidal": lambda t: E.sinusoidal_diagnostics(t, 1e4, 20, 64),
        "matrix": lambda t: E.matrix_diagnostics(t[:300], 1e4, 20, 512),
    }
    for kind, fn in cases.items():
        gpu, cpu = fn(pe.to(DEVICE)), fn(pe)
        assert gpu.factor == cpu.factor
        for field in ("norms", "offset_lo", "offset_hi", "offset_closed", "dot_blocks", "distance_blocks"):
            assert_close(record_property, f"{kind}.{field}", getattr(gpu, field), getattr(cpu, field))
        if cpu.profiles is not None:
            assert_close(record_property, f"{kind}.profile_dot", gpu.profiles.dot, cpu.profiles.dot)


# ---------------------------------------------------------------- the sweep's projection


def test_projection_and_its_signs(record_property):
    """The sweep's projection written in torch (benchmarks.sweep.torch_weighted_pca) on the device against the core's
    numpy weighted_pca: coordinates within 1e-6 of each frame's largest, explained variance ratios within 1e-6, and
    every component's sign the same (components whose eigenvalue is within 1e-6 of a neighbour's have no defined
    sign or direction: counted, and required to be none with these inputs)."""
    rng = np.random.default_rng(5)
    e = rng.normal(scale=0.4, size=(2, 11, 50))
    pe = E.sinusoidal_encoding(100, 50, dtype=torch.float64).numpy()
    p = np.stack([pe[:11], pe[rng.permutation(11)]])
    w1, w2 = 10 ** rng.uniform(-2, 2, 3000), 10 ** rng.uniform(-2, 2, 3000)
    w1[0], w2[0] = 1.0, 0.0
    want, want_ratio = weighted_pca(e, p, w1, w2, n_components=3)
    coords, ratio = torch_weighted_pca(e, p, w1, w2, n_components=3, device=DEVICE)
    assert coords.device.type == DEVICE.type
    got, got_ratio = as_np(coords), as_np(ratio)
    gaps = np.diff(-want_ratio, axis=-1)  # (S, P, 2): lambda_1 - lambda_2, lambda_2 - lambda_3, as shares
    degenerate = int((gaps < 1e-6).sum())
    record_property("degenerate_components", degenerate)
    assert degenerate == 0
    scale = np.abs(want[..., :2]).max(axis=(-2, -1), keepdims=True)
    coords_rel = float((np.abs(got[..., :2] - want[..., :2]) / scale).max())
    record_property("coords_rel", coords_rel)
    assert coords_rel <= RELATIVE
    assert_close(record_property, "explained_variance_ratio", got_ratio, want_ratio)
    flipped = int(((got[..., :2] * want[..., :2]).sum(axis=-2) < 0).sum())
    record_property("flipped_signs", flipped)
    assert flipped == 0, f"{flipped} of {want[..., :2].size // 11} components have the other sign on {DEVICE}"


# ---------------------------------------------------------------- RoPE and ALiBi


@pytest.mark.parametrize("layout", ["half_split", "interleaved"])
def test_rope(layout, record_property):
    positions = torch.cat([torch.arange(4096), torch.arange(999_000, 999_064)])
    gpu, cpu = on_both(lambda dev: rope.angle_tables(positions, 128, 1e4, position_scale=4.0, device=dev))
    assert gpu[0].device.type == DEVICE.type
    assert_close(record_property, "cos", gpu[0], cpu[0])
    assert_close(record_property, "sin", gpu[1], cpu[1])
    x = torch.randn(3, 257, 64, generator=torch.Generator().manual_seed(1))
    for dtype in (torch.float32, torch.float64):
        gpu = rope.apply_rope(x.to(DEVICE, dtype), layout=layout)
        assert gpu.device.type == DEVICE.type and gpu.dtype == dtype
        assert_close(record_property, f"apply_rope_{dtype}", gpu, rope.apply_rope(x.to(dtype), layout=layout))
    q, k = relative.query_key(64, 0, CPU)
    for dtype in (torch.float64, torch.float32):
        gpu = rope.score_check(q.to(DEVICE), k.to(DEVICE), 128, 1e4, layout=layout, dtype=dtype)
        cpu = rope.score_check(q, k, 128, 1e4, layout=layout, dtype=dtype)
        scale = float(cpu.closed.abs().max())  # spreads and errors relative to the scores' scale
        assert_close(record_property, f"scores_{dtype}", gpu.scores, cpu.scores)
        assert_close(record_property, f"closed_{dtype}", gpu.closed, cpu.closed)
        for field in ("spread", "error"):
            diff = float(np.abs(as_np(getattr(gpu, field)) - as_np(getattr(cpu, field))).max()) / scale
            record_property(f"{field}_{dtype}", diff)
            assert diff <= RELATIVE, field
    distances = torch.arange(0, 5000)
    gpu, cpu = on_both(lambda dev: rope.decay_bound(distances.to(dev), 128, 5e5))
    assert_close(record_property, "decay_bound", gpu, cpu)


def test_relative_diagnostics(record_property):
    """The encode stage's RoPE and ALiBi diagnostics with a device: arrays and summaries those of the CPU path
    (the RoPE ones within 1e-6; ALiBi's exactly: powers of two times integers are exact in float64)."""
    rope_cfg = SimpleNamespace(
        d_head=64,
        positions=96,
        layout="half_split",
        seed=0,
        base=1e4,
        larger_base=5e5,
        scale=4.0,
        max_distance=2000,
        report_distances=[0, 1, 100, 1000],
    )
    (arrays_g, summary_g), (arrays_c, summary_c) = on_both(lambda dev: relative.rope_diagnostics(rope_cfg, dev))
    assert arrays_g.keys() == arrays_c.keys()
    score_scale = np.abs(arrays_c["closed_form"]).max()
    for name in arrays_c:
        if name.startswith("spread"):  # rounding noise: compared at the scores' scale
            diff = float(np.abs(arrays_g[name] - arrays_c[name]).max() / score_scale)
            record_property(f"rope.{name}", diff)
            assert diff <= RELATIVE, name
        else:
            assert_close(record_property, f"rope.{name}", arrays_g[name], arrays_c[name])
    for key in ("decay_bound", "relative_only"):
        for variant, entry in summary_c[key].items():
            for field, value in entry.items():
                assert summary_g[key][variant][field] == pytest.approx(value, rel=RELATIVE, abs=RELATIVE), field
    alibi_cfg = SimpleNamespace(heads=[8, 12], length=64, causal=True, max_distance=300)
    (arrays_g, summary_g), (arrays_c, summary_c) = on_both(lambda dev: relative.alibi_diagnostics(alibi_cfg, dev))
    for name in arrays_c:
        assert np.array_equal(arrays_g[name], arrays_c[name]), name
    assert summary_g == summary_c


def test_alibi_is_exact(record_property):
    slopes_g, slopes_c = on_both(lambda dev: alibi.slopes(12, dev))
    assert slopes_g.device.type == DEVICE.type and torch.equal(slopes_g.cpu(), slopes_c)
    for causal in (True, False):
        bias_g, bias_c = alibi.bias(slopes_g, 300, causal=causal), alibi.bias(slopes_c, 300, causal=causal)
        assert torch.equal(bias_g.cpu(), bias_c)
        assert alibi.toeplitz_deviation(bias_g) == alibi.toeplitz_deviation(bias_c) == 0.0
    distances = torch.arange(0, 1000)
    assert torch.equal(alibi.penalty(slopes_g, distances.to(DEVICE)).cpu(), alibi.penalty(slopes_c, distances))
    record_property("bias_equal", 1)


# ---------------------------------------------------------------- memory


def test_full_matrices_that_cannot_fit_are_refused_before_allocation():
    """Beyond the device's memory (here a cap of 96 MiB, of which 64 MiB are the reserve) the full matrices are one
    PipelineError naming the sizes and the fix, raised before any allocation; below it they are computed."""
    # 2 x 8 x 3000^2 = 137.3 MiB of float64 results and a copied block of 8 x 1398 x 3000 = 32 MiB
    # (E.toeplitz_block_elements)
    profiles = E.sinusoidal_profiles(3000, 64, 1e4, DEVICE)
    pe = E.sinusoidal_encoding(3000, 64, device=DEVICE)
    with memory_cap(96 * 2**20):
        before = torch.cuda.memory_allocated(DEVICE) if DEVICE.type == "cuda" else None
        with pytest.raises(
            PipelineError,
            match=r"full 3000 x 3000 dot-product and distance matrices: 169\.3 MiB needed on .*, more than the 32\.0 MiB",
        ):
            E.profile_matrices(profiles)
        if DEVICE.type == "cuda":
            assert torch.cuda.memory_allocated(DEVICE) == before
        with pytest.raises(
            PipelineError, match=r"full 3000 x 3000 distance matrix: .* needed on .* Fix: ask for block means"
        ):
            E.distance_matrix(pe)
        with pytest.raises(PipelineError, match=r"full 3000 x 3000 dot-product matrix: .* needed on"):
            E.dot_product_matrix(pe)
        dot, dist = E.profile_matrices(E.sinusoidal_profiles(1000, 64, 1e4, DEVICE), torch.float32)
        assert dot.shape == dist.shape == (1000, 1000) and dot.device.type == DEVICE.type
