"""pipeline.core.encoding against the seed notebook's numpy formula, closed forms and scipy."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.spatial.distance import cdist

from conftest import interleaved_columns, position_norms
from pipeline.core import encoding as E
from pipeline.core.device import has_float64, resolve_device
from pipeline.core.encoding import (
    distance_matrix,
    dot_product_matrix,
    expected_norm,
    inverse_frequencies,
    offset_distance_closed_form,
    offset_distances,
    sinusoidal_encoding,
)
from pipeline.base.errors import PipelineError

CUDA = torch.cuda.is_available()
EPS = np.finfo(np.float64).eps
MPS = getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available()


def notebook_pe(n: int, d: int) -> np.ndarray:
    """The seed notebook's positional encoding, verbatim (float64)."""
    angle = np.arange(n)[:, None] / np.power(10000, (2 * (np.arange(d)[None, :] // 2)) / np.float32(d))
    angle[:, 0::2] = np.sin(angle[:, 0::2])
    angle[:, 1::2] = np.cos(angle[:, 1::2])
    return angle


def reference_pe(positions: np.ndarray, d: int, base: float = 10000.0) -> np.ndarray:
    """The same formula in float64 for arbitrary positions and any d (odd d: last column is a sine).

    Its last bits depend on the machine: numpy's power, sin and cos are within an ulp or two of exact on every CPU's
    kernels (SIMD or libm), so an angle p w_i is off by ~4 eps p w_i and an entry by that plus an ulp, where ours
    (pipeline.core.portable) has the same bits everywhere. The tolerances against it below cover that spread."""
    i = np.arange(d)
    angle = np.asarray(positions, dtype=np.float64)[:, None] / np.power(base, (2 * (i // 2)) / float(d))[None, :]
    return np.where(i % 2 == 0, np.sin(angle), np.cos(angle))


def reference_freqs(d: int, base: float = 10000.0) -> np.ndarray:
    return 1.0 / np.power(base, np.arange(0, d, 2) / float(d))


# ---------------------------------------------------------------- the notebook's matrix


@pytest.mark.parametrize("n,d", [(100, 100), (100, 50)])
def test_float32_matches_notebook(n, d):
    """float32 output equals the notebook's float64 matrix to 1e-6."""
    pe = sinusoidal_encoding(n, d)
    assert pe.dtype == torch.float32 and pe.shape == (n, d)
    # float32 rounding: at most 3e-8 (values <= 1); the reference's machine spread, angles < 100: below 1e-13
    assert np.abs(pe.numpy().astype(np.float64) - notebook_pe(n, d)).max() < 1e-6


@pytest.mark.parametrize("n,d", [(100, 100), (100, 50)])
def test_float64_matches_notebook(n, d):
    """float64 output equals the notebook's matrix to ~1e-12 and keeps dtype float64."""
    pe = sinusoidal_encoding(n, d, dtype=torch.float64)
    assert pe.dtype == torch.float64
    # angles < 100: the reference's machine spread (4 eps p w_i) is below 1e-13
    assert np.abs(pe.numpy() - notebook_pe(n, d)).max() < 1e-12


def test_seed_norm_of_position_34():
    """||PE(34)|| at d=100 reproduces the notebook's 7.0710678."""
    norms = position_norms(sinusoidal_encoding(100, 100))
    assert norms.shape == (100,)
    # printed with 7 decimals (half a unit: 5e-8); ours has the same bits on every machine
    assert abs(float(norms[34]) - 7.0710678) < 5e-8


def test_seed_distance_70_72():
    """||PE(70) - PE(72)|| at d=100 reproduces the notebook's 3.2668781."""
    pe = sinusoidal_encoding(100, 100).double()
    dist = float(torch.linalg.vector_norm(pe[70] - pe[72]))
    assert abs(dist - 3.2668781) < 5e-8  # printed with 7 decimals; a sum of 100 squares: any machine within 1e-14


def test_inverse_frequencies_closed_form():
    """w_i = 1 / 10000^(2i/d), one per sin/cos pair (ceil(d/2) of them)."""
    for d in (100, 7):
        w = inverse_frequencies(d, 10000.0)
        assert w.dtype == torch.float64 and w.shape == (math.ceil(d / 2),)
        # ours is correctly rounded; numpy's power is within an ulp or two on every CPU's kernels, and the division
        # rounds once: a few ulp apart at most, relative (an absolute 1e-15 would be 10 ulp at w_0 = 1 and 1e-11
        # relative at the lowest frequency). Any other exponent is off by far more.
        np.testing.assert_allclose(w.numpy(), reference_freqs(d), rtol=16 * EPS, atol=0)


def test_other_base():
    """The base parameter is honoured (not hard-wired to 10000)."""
    pe = sinusoidal_encoding(30, 16, base=100.0, dtype=torch.float64)
    assert np.abs(pe.numpy() - reference_pe(np.arange(30), 16, base=100.0)).max() < 1e-12  # angles < 30: spread 3e-14
    assert np.abs(pe.numpy() - reference_pe(np.arange(30), 16)).max() > 1e-2


# ---------------------------------------------------------------- closed forms


@pytest.mark.parametrize("d", [100, 50, 8])
def test_row_norms_are_sqrt_half_d(d):
    """Every row has norm sqrt(d/2) for even d (each sin/cos pair contributes 1)."""
    assert expected_norm(d) == pytest.approx(math.sqrt(d / 2), abs=1e-15)  # sqrt rounds correctly everywhere
    norms32 = position_norms(sinusoidal_encoding(200, d)).numpy()
    norms64 = position_norms(sinusoidal_encoding(200, d, dtype=torch.float64)).numpy()
    # ours against the exact value (no reference computed on this machine): float32 entries are rounded by up to
    # 3e-8, float64 ones by an ulp, and the sum of d squares by d eps
    assert np.abs(norms32 - math.sqrt(d / 2)).max() < 1e-6
    assert np.abs(norms64 - math.sqrt(d / 2)).max() < 1e-12


def test_position_norms_accumulate_in_float64():
    """position_norms returns float64 even for a float32 matrix."""
    assert position_norms(sinusoidal_encoding(10, 10)).dtype == torch.float64


@pytest.mark.parametrize("d", [100, 50])
def test_offset_distances_match_closed_form(d):
    """For even d, ||PE(p) - PE(p+k)|| depends only on k: lo == hi == sqrt(sum_i 2 - 2 cos(k w_i))."""
    k = np.arange(1, 21)
    closed = np.sqrt((2.0 - 2.0 * np.cos(k[:, None] * reference_freqs(d)[None, :])).sum(axis=1))
    cf = offset_distance_closed_form(torch.arange(1, 21), d, 10000.0)
    assert np.abs(cf.numpy() - closed).max() < 1e-12  # offsets <= 20: the reference's spread is below 1e-14

    lo, hi = offset_distances(sinusoidal_encoding(100, d, dtype=torch.float64), 20)
    assert lo.shape == hi.shape == (20,)
    # from the rows themselves (angles < 100): within 1e-13 of the closed form on any machine
    assert np.abs(lo.numpy() - closed).max() < 1e-9
    assert np.abs(hi.numpy() - closed).max() < 1e-9
    assert (hi - lo).max() < 1e-9

    lo32, hi32 = offset_distances(sinusoidal_encoding(100, d), 20)
    assert np.abs(lo32.numpy() - closed).max() < 1e-5  # float32 entries: 3e-8 each, ~1e-6 on a distance
    assert (hi32 - lo32).max() < 1e-5


def test_offset_distances_brute_force_and_cap():
    """lo/hi are the min/max over p of the pairwise distance; K is capped at n - 1."""
    # odd d and a small base: the unpaired last sine turns fast enough for the distance to vary with p
    pe = sinusoidal_encoding(12, 7, base=10.0, dtype=torch.float64)
    lo, hi = offset_distances(pe, 500)
    assert lo.shape == hi.shape == (11,)
    ref = reference_pe(np.arange(12), 7, base=10.0)
    for k in range(1, 12):
        dist = np.linalg.norm(ref[k:] - ref[:-k], axis=1)
        # angles < 12 and base 10: the reference's spread is below 1e-14
        assert abs(float(lo[k - 1]) - dist.min()) < 1e-12
        assert abs(float(hi[k - 1]) - dist.max()) < 1e-12
    assert (hi - lo).max() > 1e-6  # odd d: the unpaired sine makes the distance depend on p


def test_dot_product_matrix_is_cos_of_offset():
    """PE(a) . PE(b) = sum_i cos((a - b) w_i) for even d."""
    n, d = 100, 100
    a = np.arange(n)
    ref = np.cos((a[:, None, None] - a[None, :, None]) * reference_freqs(d)[None, None, :]).sum(axis=2)
    gram = dot_product_matrix(sinusoidal_encoding(n, d, dtype=torch.float64))
    assert gram.dtype == torch.float64 and gram.shape == (n, n)
    # 50 cosines of angles < 100: the reference's spread is below 1e-12
    assert np.abs(gram.numpy() - ref).max() < 1e-10
    gram32 = dot_product_matrix(sinusoidal_encoding(n, d))
    assert gram32.dtype == torch.float64
    assert np.abs(gram32.numpy() - ref).max() < 1e-5


def test_distance_matrix_matches_cdist():
    """distance_matrix is the Euclidean distance matrix: scipy cdist, symmetric, zero diagonal, no NaN/negatives."""
    pe = sinusoidal_encoding(100, 100, dtype=torch.float64)
    dist = distance_matrix(pe).numpy()
    ref = cdist(reference_pe(np.arange(100), 100), reference_pe(np.arange(100), 100))
    assert dist.shape == (100, 100)
    assert np.abs(dist - ref).max() < 1e-9  # angles < 100, distances < 11: the reference's spread is below 1e-12
    assert np.abs(dist - dist.T).max() < 1e-12  # ours alone, the same bits on every machine
    assert np.all(np.diag(dist) == 0.0)
    assert not np.isnan(dist).any() and (dist >= 0).all()


def test_distance_matrix_with_given_gram_and_float32():
    """A precomputed Gram gives the same result; float32 PE stays NaN-free with an exact zero diagonal."""
    pe32 = sinusoidal_encoding(300, 64)
    dist = distance_matrix(pe32).numpy()
    same = distance_matrix(pe32, gram=dot_product_matrix(pe32)).numpy()
    assert np.array_equal(dist, same)
    assert np.all(np.diag(dist) == 0.0) and not np.isnan(dist).any() and (dist >= 0).all()
    ref = cdist(pe32.double().numpy(), pe32.double().numpy())
    assert np.abs(dist - ref).max() < 1e-5  # the same float32 entries on both sides: float64 rounding only


def test_distance_and_dot_product_are_toeplitz():
    """Both matrices depend only on a - b (even d): every diagonal is constant and equals the closed form."""
    n, d = 80, 50
    pe = sinusoidal_encoding(n, d, dtype=torch.float64)
    dist, gram = distance_matrix(pe).numpy(), dot_product_matrix(pe).numpy()
    w = reference_freqs(d)
    for k in range(-(n - 1), n):
        diag_d, diag_g = np.diagonal(dist, offset=k), np.diagonal(gram, offset=k)
        # ours (the same bits on every machine), and closed forms at angles < 80 (spread below 1e-12)
        assert np.ptp(diag_d) < 1e-9 and np.ptp(diag_g) < 1e-9
        assert abs(diag_d[0] - np.sqrt((2 - 2 * np.cos(k * w)).sum())) < 1e-9
        assert abs(diag_g[0] - np.cos(k * w).sum()) < 1e-10


# ---------------------------------------------------------------- odd d, n = 1, large positions


@pytest.mark.parametrize("d", [7, 51, 1])
def test_odd_d_model(d):
    """Odd d: shape (n, d), last column is a sine, values follow the formula generalised to odd d."""
    n = 60
    pe = sinusoidal_encoding(n, d, dtype=torch.float64)
    assert pe.shape == (n, d)
    ref = reference_pe(np.arange(n), d)
    assert np.abs(pe.numpy() - ref).max() < 1e-12  # angles < 60: the reference's spread is below 1e-13
    last_w = 1.0 / 10000 ** ((d - 1) / d)
    assert np.abs(pe[:, -1].numpy() - np.sin(np.arange(n) * last_w)).max() < 1e-12
    assert float(pe[0, -1]) == 0.0  # sin(0), not cos(0)
    pe32 = sinusoidal_encoding(n, d)
    assert np.abs(pe32.numpy().astype(np.float64) - ref).max() < 1e-6  # float32 rounding: 3e-8


@pytest.mark.parametrize("d", [6, 7])
def test_single_position(d):
    """max_len=1: one row [0, 1, 0, 1, ...] and no offsets to measure."""
    pe = sinusoidal_encoding(1, d)
    assert pe.shape == (1, d)
    expected = np.array([i % 2 for i in range(d)], dtype=np.float32)
    assert np.array_equal(pe.numpy()[0], expected)
    lo, hi = offset_distances(pe, 20)
    assert lo.numel() == 0 and hi.numel() == 0
    assert distance_matrix(pe).numpy().tolist() == [[0.0]]


def test_large_positions_keep_float64_angles():
    """At position ~70000 float32 output still matches float64 to 1e-6 (float32 angles would be off by ~1e-3)."""
    n, d = 70000, 64
    pe = sinusoidal_encoding(n, d)
    rows = np.arange(n - 50, n)
    ref = reference_pe(rows, d)
    assert np.abs(pe[n - 50 :].numpy().astype(np.float64) - ref).max() < 1e-6
    # the test can tell: the same formula with float32 angles misses the reference by far more than 1e-6
    i = np.arange(d)
    angle32 = rows.astype(np.float32)[:, None] * (
        1.0 / np.power(np.float32(10000), (2 * (i // 2)) / np.float32(d))
    ).astype(np.float32)
    naive = np.where(i % 2 == 0, np.sin(angle32), np.cos(angle32))
    assert np.abs(naive - ref).max() > 1e-4


# ---------------------------------------------------------------- dtype, device, arguments


def test_dtype_argument():
    """The output dtype follows the dtype argument; default is float32."""
    assert sinusoidal_encoding(5, 4).dtype == torch.float32
    assert sinusoidal_encoding(5, 4, dtype=torch.float64).dtype == torch.float64
    assert sinusoidal_encoding(5, 4, device="cpu").device.type == "cpu"


@pytest.mark.parametrize("max_len,d_model", [(0, 10), (10, 0), (-1, 10), (10, -3)])
def test_invalid_sizes_raise(max_len, d_model):
    """Non-positive sizes raise ValueError."""
    with pytest.raises(ValueError):
        sinusoidal_encoding(max_len, d_model)


def test_resolve_device_cpu():
    """'cpu' resolves to the CPU device."""
    assert resolve_device("cpu") == torch.device("cpu")


@pytest.mark.skipif(CUDA or MPS, reason="an accelerator is available")
def test_resolve_device_auto_without_accelerator():
    """'auto' falls back to the CPU when torch sees neither CUDA nor MPS."""
    assert resolve_device("auto") == torch.device("cpu")


@pytest.mark.skipif(CUDA, reason="CUDA is available")
@pytest.mark.parametrize("name", ["cuda", "cuda:0"])
def test_resolve_device_cuda_without_cuda(name):
    """Asking for CUDA without it is a PipelineError naming the config key encoding.device."""
    with pytest.raises(PipelineError, match="encoding.device"):
        resolve_device(name)


def test_resolve_device_nonsense():
    """An unknown device name is a PipelineError naming encoding.device."""
    with pytest.raises(PipelineError, match="encoding.device"):
        resolve_device("tpu-please")


@pytest.mark.cuda
@pytest.mark.skipif(not CUDA, reason="needs CUDA")
def test_resolve_device_auto_prefers_cuda():
    """'auto' picks CUDA when it is there."""
    assert resolve_device("auto").type == "cuda"


@pytest.mark.cuda
@pytest.mark.skipif(not CUDA, reason="needs CUDA")
@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-6), (torch.float64, 1e-12)])
def test_cuda_matches_cpu(dtype, tol):
    """The encoding and its diagnostics computed on CUDA equal the CPU results."""
    cpu = sinusoidal_encoding(4096, 64, dtype=dtype)
    gpu = sinusoidal_encoding(4096, 64, dtype=dtype, device="cuda")
    assert gpu.device.type == "cuda" and gpu.dtype == dtype
    assert (gpu.cpu() - cpu).abs().max().item() < tol
    assert (position_norms(gpu).cpu() - position_norms(cpu)).abs().max().item() < 1e-9
    lo_c, hi_c = offset_distances(cpu[:200], 20)
    lo_g, hi_g = offset_distances(gpu[:200], 20)
    assert (lo_g.cpu() - lo_c).abs().max().item() < 1e-9 and (hi_g.cpu() - hi_c).abs().max().item() < 1e-9
    assert (distance_matrix(gpu[:200]).cpu() - distance_matrix(cpu[:200])).abs().max().item() < 1e-6


# ---------------------------------------------------------------- layouts, dtypes, positions up to 1,000,000

FORMAT = {torch.float64: (53, -1022), torch.float32: (24, -126), torch.float16: (11, -14), torch.bfloat16: (8, -126)}


def half_ulp(ref: np.ndarray, dtype: torch.dtype) -> np.ndarray:
    """Half the spacing of `dtype` numbers around each value of ref: the error of rounding to nearest."""
    bits, emin = FORMAT[dtype]
    exponent = np.where(ref == 0, emin, np.maximum(np.frexp(np.abs(ref))[1] - 1, emin))
    return np.ldexp(0.5, exponent - (bits - 1))


def assert_within_rounding(pe: torch.Tensor, ref: np.ndarray, max_angle: float) -> None:
    """Every entry is the float64 reference rounded to pe's dtype, up to the reference's own angle error."""
    # The two angles p w_i differ by the reference's roundings (numpy's power, P ulp off on some CPU's kernel: P eps
    # relative; a division) and ours (a correctly rounded frequency, a product): (P + 2) eps p. P is an ulp or two;
    # 8 eps p (16 units of 2^-53) covers P up to 6, and stays far below a float32 half ulp (a double rounding shows).
    slack = 16 * 2.0**-53 * max_angle + 1e-15
    err = np.abs(pe.double().numpy() - ref)
    assert (err <= half_ulp(ref, pe.dtype) + slack).all(), (
        f"{pe.dtype}: worst excess {(err - half_ulp(ref, pe.dtype)).max():.3g}"
    )


@pytest.mark.parametrize("d", [8, 7, 1, 2, 100, 51])
def test_concatenated_layout(d):
    """[sin | cos]: the first ceil(d/2) columns are the sines, the rest the cosines of the same frequencies,
    a column permutation of the interleaved encoding."""
    n = 120
    conc = sinusoidal_encoding(n, d, layout="concatenated", dtype=torch.float64).numpy()
    inter = sinusoidal_encoding(n, d, dtype=torch.float64).numpy()
    h = (d + 1) // 2
    angle = np.arange(n)[:, None] * reference_freqs(d)[None, :]
    assert np.abs(conc[:, :h] - np.sin(angle)).max() < 1e-12
    assert np.allclose(conc[:, h:], np.cos(angle[:, : d // 2]), rtol=0, atol=1e-12)  # empty for d = 1
    order = interleaved_columns(d, "concatenated").numpy()
    assert sorted(order) == list(range(d))
    assert np.array_equal(conc, inter[:, order])
    assert np.array_equal(interleaved_columns(d, "interleaved").numpy(), np.arange(d))


def test_unknown_layout_raises():
    with pytest.raises(ValueError, match="layout"):
        sinusoidal_encoding(4, 4, layout="sideways")
    with pytest.raises(ValueError, match="start"):
        sinusoidal_encoding(4, 4, start=-1)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("layout", ["interleaved", "concatenated"])
def test_every_dtype_within_its_rounding_up_to_a_million(dtype, layout):
    """Rows near position 1,000,000 (and the first rows) in every dtype are the float64 reference rounded once."""
    d = 64
    for start, n in ((0, 300), (999_000, 2_100)):
        pe = sinusoidal_encoding(n, d, layout=layout, start=start, dtype=dtype)
        assert pe.dtype == dtype and pe.shape == (n, d)
        ref = reference_pe(np.arange(start, start + n), d)[:, interleaved_columns(d, layout).numpy()]
        assert_within_rounding(pe, ref, max_angle=float(start + n))


def test_every_position_up_to_a_million_float32():
    """All 1,048,577 positions (d=6, odd d=5): float32 output within its rounding of float64 everywhere."""
    n = 2**20 + 1
    for d in (6, 5):
        pe = sinusoidal_encoding(n, d)
        assert_within_rounding(pe, reference_pe(np.arange(n), d), max_angle=float(n))


def test_start_continues_the_encoding():
    """Rows of an encoding started at `start` are the rows start.. of the long encoding."""
    full = sinusoidal_encoding(5000, 30, dtype=torch.float64)
    part = sinusoidal_encoding(1000, 30, start=3777, dtype=torch.float64)
    assert (part - full[3777:4777]).abs().max().item() < 1e-12  # ours on both sides: no machine spread


def test_devices_without_float64_compute_on_the_cpu():
    """MPS has no float64: work happens on the CPU (the same values), other devices compute in place."""
    assert not has_float64("mps") and has_float64("cpu") and has_float64(torch.device("cuda"))
    assert E._work_device(torch.device("mps")) == torch.device("cpu")
    assert E._work_device("cpu") == torch.device("cpu")


# ---------------------------------------------------------------- structure: profiles and their matrices


def reference_matrices(pe64: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return pe64 @ pe64.T, cdist(pe64, pe64)


def numpy_block_means(matrix: np.ndarray, f: int) -> np.ndarray:
    m = matrix.shape[0] // f
    return matrix[: m * f, : m * f].reshape(m, f, m, f).mean(axis=(1, 3))


@pytest.mark.parametrize("d", [100, 64, 51, 7, 2, 1])
def test_profiles_closed_form(d):
    """dot(k) = sum_i cos(k w_i) and dist2(k) = sum_i 4 sin^2(k w_i / 2) over the pairs; u(p) for odd d."""
    n = 700
    prof = E.sinusoidal_profiles(n, d)
    w = reference_freqs(d)[: d // 2]
    k = np.arange(n)[:, None]
    assert prof.dot.dtype == torch.float64 and prof.dot.shape == (n,)
    # Offsets up to 699: the reference's angle k w_i is off by ~(P + 2) eps k w_i on a machine whose power is P ulp
    # off (P an ulp or two), ours by an ulp; cos and sin add an ulp or two a term. cos has slope <= 1, 4 sin^2(x / 2)
    # slope <= 2: the sums differ by at most ~8 eps (k sum(w) + terms). The bound is twice that: a machine's kernels
    # cannot reach it, a wrong frequency or an angle formed in float32 is off by far more.
    bound = 16 * EPS * (k[:, 0] * w.sum() + w.size)
    assert (np.abs(prof.dot.numpy() - np.cos(k * w).sum(axis=1)) <= bound).all()
    assert (np.abs(prof.dist2.numpy() - (4 * np.sin(k * w / 2) ** 2).sum(axis=1)) <= bound).all()
    assert prof.dist2[0].item() == 0.0 and (prof.dist2 >= 0).all()
    assert prof.toeplitz == (d % 2 == 0)
    if d % 2:  # the lowest frequency: angles below 0.1, the reference's spread below 1e-16
        assert np.abs(prof.unpaired.numpy() - np.sin(np.arange(n) * reference_freqs(d)[-1])).max() < 1e-12


@pytest.mark.parametrize("d", [50, 7])
@pytest.mark.parametrize("layout", ["interleaved", "concatenated"])
def test_profile_matrices_equal_the_reference_and_the_generic_path(d, layout):
    """Full matrices from the profiles = float64 Gram / scipy cdist of the reference = the generic path."""
    n = 300
    pe = sinusoidal_encoding(n, d, layout=layout, dtype=torch.float64)
    ref_dot, ref_dist = reference_matrices(reference_pe(np.arange(n), d))
    dot, dist = E.profile_matrices(E.sinusoidal_profiles(n, d))
    assert dot.shape == dist.shape == (n, n) and dot.dtype == dist.dtype == torch.float64
    # offsets < 300: the reference's spread is 4 eps k sum(w) < 1e-12, and BLAS adds d eps (values <= d / 2)
    assert np.abs(dot.numpy() - ref_dot).max() < 1e-10
    assert np.abs(dist.numpy() - ref_dist).max() < 1e-10
    assert np.array_equal(dist.numpy(), dist.numpy().T) and np.all(np.diag(dist.numpy()) == 0.0)
    assert (dist >= 0).all()
    assert (dot - dot_product_matrix(pe)).abs().max().item() < 1e-10  # ours on both sides: no machine spread
    assert (dist - distance_matrix(pe)).abs().max().item() < 1e-10
    dot32, dist32 = E.profile_matrices(E.sinusoidal_profiles(n, d), dtype=torch.float32)
    assert dot32.dtype == torch.float32 and (dist32.double() - dist).abs().max().item() < 1e-5


def test_toeplitz_rows_is_scipy_toeplitz():
    from scipy.linalg import toeplitz

    profile = torch.arange(9, dtype=torch.float64) ** 1.5
    full = toeplitz(profile.numpy())
    assert np.array_equal(E.toeplitz_rows(profile).numpy(), full)
    assert np.array_equal(E.toeplitz_rows(profile, slice(3, 7)).numpy(), full[3:7])
    assert E.toeplitz_rows(profile, dtype=torch.float32).dtype == torch.float32


@pytest.mark.parametrize("block", [1, 9, 10, 25, 80])
def test_toeplitz_rows_copied_in_blocks_is_the_same_matrix(monkeypatch, block):
    """Blocks of one row, of a row and a part, and of several rows give scipy's matrix (CUDA copies beyond 2^31
    elements only in blocks)."""
    from scipy.linalg import toeplitz

    monkeypatch.setattr(E, "TOEPLITZ_BLOCK", block)
    profile = torch.arange(9, dtype=torch.float64) ** 1.5
    full = toeplitz(profile.numpy())
    assert np.array_equal(E.toeplitz_rows(profile).numpy(), full)
    assert np.array_equal(E.toeplitz_rows(profile, slice(2, 8)).numpy(), full[2:8])


@pytest.mark.parametrize("d,n,f", [(64, 1000, 8), (64, 1003, 16), (7, 500, 9), (1, 97, 4), (10, 40, 40)])
def test_block_means_profile_and_generic_equal_numpy(d, n, f):
    """Exact f x f block means, from the profiles (no n x n work for even d) and from any matrix, equal
    numpy's block average of the full float64 matrices (the last n mod f positions are left out)."""
    ref_dot, ref_dist = reference_matrices(reference_pe(np.arange(n), d))
    want_dot, want_dist = numpy_block_means(ref_dot, f), numpy_block_means(ref_dist, f)
    dot, dist = E.profile_block_means(E.sinusoidal_profiles(n, d), f)
    assert dot.shape == dist.shape == want_dot.shape == (n // f, n // f)
    # offsets < 1003: the reference's spread is 4 eps k sum(w) < 4e-12 (d = 64: sum(w) ~ 4), BLAS's < 5e-13
    assert np.abs(dot.numpy() - want_dot).max() < 1e-10
    assert np.abs(dist.numpy() - want_dist).max() < 1e-10
    gdot, gdist = E.block_means(sinusoidal_encoding(n, d, layout="concatenated", dtype=torch.float64), f)
    assert np.abs(gdot.numpy() - want_dot).max() < 1e-10
    assert np.abs(gdist.numpy() - want_dist).max() < 1e-10
    from pipeline.figures.drawing import block_average

    assert (E.block_factor(n, n // f),) * 2 == block_average(ref_dist, n // f)[1]


def test_block_means_of_a_learned_matrix():
    """The generic block means on a random (learned-like) matrix equal numpy's block average of cdist."""
    x = np.random.default_rng(4).normal(size=(90, 13))
    dot, dist = E.block_means(torch.as_tensor(x), 6)
    # BLAS's x @ x.T differs by machine by ~d eps sum|x_i y_i| (below 1e-13 here); cdist has no CPU dispatch
    assert np.abs(dot.numpy() - numpy_block_means(x @ x.T, 6)).max() < 1e-12
    assert np.abs(dist.numpy() - numpy_block_means(cdist(x, x), 6)).max() < 1e-12


# ---------------------------------------------------------------- generic path: careful distances, Gram band


def test_distance_matrix_near_duplicates_is_accurate():
    """Rows 1e-7 apart with norm ~30: |a|^2 + |b|^2 - 2 a.b cancels to noise; the careful path recomputes them."""
    rng = np.random.default_rng(8)
    base = rng.normal(scale=5.0, size=(6, 40))
    x = np.concatenate([base, base + rng.normal(scale=1e-7, size=base.shape)])
    dist = distance_matrix(torch.as_tensor(x)).numpy()
    ref = cdist(x, x)
    near = np.abs(np.arange(12)[:, None] - np.arange(12)[None, :]) == 6
    # scipy's cdist (no CPU dispatch) is accurate to ~eps |x| / |x - y| ~ 1e-8 relative on the tiny distances, ours
    # too; the others (~45) to ~eps (|a|^2 + |b|^2) / |a - b| ~ 1e-14: 1e-6 and 1e-12 leave a hundredfold margin
    assert np.abs(dist[near] / ref[near] - 1).max() < 1e-6  # relative accuracy on the tiny distances
    assert np.abs(dist - ref).max() < 1e-12
    assert np.all(np.diag(dist) == 0.0) and np.array_equal(dist, dist.T) and (dist >= 0).all()
    # the naive formula really is off here (the test can tell)
    sq = (x * x).sum(axis=1)
    naive = np.sqrt(np.clip(sq[:, None] + sq[None, :] - 2 * x @ x.T, 0, None))
    assert np.abs(naive[near] / ref[near] - 1).max() > 1e-3


@pytest.mark.parametrize("n,d,K,chunk", [(200, 16, 20, 2**22), (200, 16, 5, 256), (37, 9, 36, 64), (1, 4, 3, 64)])
def test_band_gram_is_the_gram_band(n, d, K, chunk):
    """band[p, k] = x_p . x_{p+k}, zero past the end, across row chunks and tails."""
    x = torch.as_tensor(np.random.default_rng(n + K).normal(size=(n, d)).astype(np.float32))
    band = E.band_gram(x, K, chunk_elems=chunk)
    gram = x.double().numpy() @ x.double().numpy().T
    assert band.shape == (n, K + 1) and band.dtype == torch.float64
    for k in range(K + 1):
        want = np.zeros(n)
        want[: max(0, n - k)] = np.diagonal(gram, offset=k)
        # float32 products are exact in float64; BLAS's summation order (by machine) moves these sums by < 1e-13
        assert np.abs(band[:, k].numpy() - want).max() < 1e-12


def test_offset_distances_near_duplicate_neighbours():
    """Adjacent rows nearly equal (a learned encoding can do that): the band path recomputes them exactly."""
    rng = np.random.default_rng(9)
    x = np.repeat(rng.normal(scale=3.0, size=(20, 30)), 2, axis=0) + rng.normal(scale=1e-8, size=(40, 30))
    lo, hi = offset_distances(torch.as_tensor(x), 3)
    for k in range(1, 4):
        dist = np.linalg.norm(x[k:] - x[:-k], axis=1)  # numpy's own reduction: no CPU dispatch
        # the 1e-8 distances are exact to ~eps |x| / 1e-8 ~ 1e-7 relative (on either side), the others to an ulp
        assert abs(lo[k - 1].item() / dist.min() - 1) < 1e-6 and abs(hi[k - 1].item() / dist.max() - 1) < 1e-12


@pytest.mark.parametrize("d", [64, 7])
def test_sinusoidal_diagnostics_agree_with_brute_force(d):
    """The stage's diagnostics: norms and offsets of the matrix itself, profiles, block means at max_size."""
    n = 400
    pe = sinusoidal_encoding(n, d, layout="concatenated")
    diag = E.sinusoidal_diagnostics(pe, 10000.0, 20, max_size=64)
    x = pe.double().numpy()
    # the same float32 entries on both sides, numpy's norm without CPU dispatch: float64 rounding only
    assert np.abs(diag.norms.numpy() - np.linalg.norm(x, axis=1)).max() < 1e-12
    for k in range(1, 21):
        dist = np.linalg.norm(x[k:] - x[:-k], axis=1)
        assert abs(diag.offset_lo[k - 1].item() - dist.min()) < 1e-12
        assert abs(diag.offset_hi[k - 1].item() - dist.max()) < 1e-12
    assert (
        np.abs(diag.offset_closed.numpy() - offset_distance_closed_form(torch.arange(1, 21), d, 1e4).numpy()).max() == 0
    )
    assert diag.factor == 7 and diag.dot_blocks.shape == (57, 57)
    ref_dot, ref_dist = reference_matrices(reference_pe(np.arange(n), d))
    # offsets < 400: the reference's spread is below 2e-12; the float32 table's rounding is in both
    assert np.abs(diag.dot_blocks.numpy() - numpy_block_means(ref_dot, 7)).max() < 1e-10
    assert np.abs(diag.distance_blocks.numpy() - numpy_block_means(ref_dist, 7)).max() < 1e-10
    small = E.sinusoidal_diagnostics(pe[:50], 10000.0, 20, max_size=64)
    assert small.factor == 1 and np.abs(small.distance_blocks.numpy() - ref_dist[:50, :50]).max() < 1e-10


def test_diagnostics_of_a_single_position():
    """n = 1: one norm, no offsets, 1 x 1 matrices."""
    diag = E.sinusoidal_diagnostics(sinusoidal_encoding(1, 6), 10000.0, 20, max_size=8)
    assert diag.norms.shape == (1,) and abs(diag.norms.item() - math.sqrt(3)) < 1e-7
    assert diag.offset_lo.numel() == 0 and diag.offset_closed.numel() == 0
    assert diag.dot_blocks.tolist() == [[3.0]] and diag.distance_blocks.tolist() == [[0.0]]


# ---------------------------------------------------------------- the encode stage at large max_len


def test_encode_stage_writes_block_means_not_full_matrices(tmp_path, small_store):
    """max_len=3000 > max_matrix_size=100: dot/distance.npy are exact 30 x 30 block means (100 x 100), the
    profiles are written, matrices.json says how; concatenated layout honoured; the notebook's probes hold."""
    from conftest import DIM, params_for, typed

    from pipeline.base.files import read_json
    from pipeline.base.paths import Layout
    from pipeline.stages import encode, tokenize

    params = params_for(
        "encoding.max_len=3000",
        "encoding.max_matrix_size=100",
        "encoding.layout=concatenated",
        "encoding.distance_pairs=[[70,72],[0,2999]]",
    )
    layout = Layout(tmp_path, glove=small_store)
    tokenize.run(typed(params), layout, tmp_path)
    summary = encode.encode_positions(typed(params), layout, torch.device("cpu"))  # the stage's encoding part alone
    out = layout.encode_dir
    pe = np.load(out / "pe.npy")
    assert pe.shape == (3000, DIM)
    ref = reference_pe(np.arange(3000), DIM)[:, interleaved_columns(DIM, "concatenated").numpy()]
    # a float32 file (rounding: 3e-8 on values <= 1); the reference's spread (angles < 3000, d = 8) is below 1e-11
    assert np.abs(pe - ref).max() < 1e-6
    dot, dist = np.load(out / "dot.npy"), np.load(out / "distance.npy")
    assert dot.shape == dist.shape == (100, 100) and dot.dtype == np.float32
    ref_dot, ref_dist = reference_matrices(ref)
    # float32 block means of values <= DIM / 2 = 4: rounding up to 2.4e-7, plus the float32 table's
    assert np.abs(dot - numpy_block_means(ref_dot, 30)).max() < 1e-5
    assert np.abs(dist - numpy_block_means(ref_dist, 30)).max() < 1e-5
    assert read_json(out / "matrices.json") == {
        "encoding": "sinusoidal",
        "layout": "concatenated",
        "block": 30,
        "side": 100,
        "positions_covered": 3000,
        "toeplitz": True,
        "method": "closed-form profiles, exact block means",
    }
    prof = np.load(out / "profiles.npz")
    assert np.array_equal(prof["offset"], np.arange(3000)) and prof["unpaired"].size == 0
    # float64 profiles: the reference's spread at offsets < 3000 (sum(w) ~ 1.1 at d = 8) is below 3e-12
    assert np.abs(prof["distance"] - ref_dist[0]).max() < 1e-10 and np.abs(prof["dot"] - ref_dot[0]).max() < 1e-10
    assert summary["norm_max_abs_dev"] < 1e-6 and summary["offset_distance_max_spread"] < 1e-5
    assert abs(summary["distance"]["p0_p2999"] - ref_dist[0, 2999]) < 1e-6


def test_encode_stage_learned_table_takes_the_generic_path(tmp_path, small_store):
    """encoding=learned: the seeded table, its dot/distance block means from the float64 Gram, no profiles."""
    from conftest import DIM, params_for, typed

    from pipeline.base.files import read_json
    from pipeline.base.paths import Layout
    from pipeline.core.random_tables import learned_position_table
    from pipeline.stages import encode, tokenize

    params = params_for("encoding=learned", "encoding.max_len=300", "encoding.max_matrix_size=50")
    layout = Layout(tmp_path, glove=small_store)
    tokenize.run(typed(params), layout, tmp_path)
    summary = encode.encode_positions(typed(params), layout, torch.device("cpu"))  # the stage's encoding part alone
    enc = params["encoding"]
    table = learned_position_table(300, DIM, enc["seed"], enc["init"], enc["scale"]).double().numpy()
    out = layout.encode_dir
    assert np.array_equal(np.load(out / "pe.npy"), table.astype(np.float32))
    ref_dot, ref_dist = reference_matrices(table)
    # float32 files: half an ulp of block means below 1 (6e-8 at most); BLAS's spread is ~1e-16 on them
    assert np.abs(np.load(out / "dot.npy") - numpy_block_means(ref_dot, 6)).max() < 1e-6
    assert np.abs(np.load(out / "distance.npy") - numpy_block_means(ref_dist, 6)).max() < 1e-6
    mats = read_json(out / "matrices.json")
    assert mats["encoding"] == "learned" and mats["layout"] is None and mats["toeplitz"] is False
    assert mats["block"] == 6 and not (out / "profiles.npz").exists()
    lo = min(np.linalg.norm(table[1:] - table[:-1], axis=1))
    assert summary["offset_distance_max_spread"] > 1e-3 and abs(summary["norm_max_abs_dev"]) > 1e-3
    # the CSV holds 12 significant digits of a distance below 1; numpy's norm has no CPU dispatch
    assert abs(float(np.loadtxt(layout.plots_dir / "offset_distance.csv", delimiter=",", skiprows=1)[0, 1]) - lo) < 1e-9


def test_bad_layout_or_matrix_size_is_refused_naming_the_key():
    from conftest import params_for

    with pytest.raises(PipelineError, match=r"encoding\.layout = 'diagonal'.*interleaved.*concatenated"):
        params_for("encoding.layout=diagonal")
    with pytest.raises(PipelineError, match=r"encoding\.max_matrix_size = 4 .*>= 8"):
        params_for("encoding.max_matrix_size=4")


# ---------------------------------------------------------------- CUDA (skipped without a GPU)


@pytest.mark.cuda
@pytest.mark.skipif(not CUDA, reason="needs CUDA")
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_cuda_encoding_within_rounding_and_diagnostics_match_cpu(dtype):
    pe = sinusoidal_encoding(2100, 64, start=999_000, layout="concatenated", device="cuda", dtype=dtype)
    assert pe.device.type == "cuda"
    ref = reference_pe(np.arange(999_000, 1_001_100), 64)[:, interleaved_columns(64, "concatenated").numpy()]
    assert_within_rounding(pe.cpu(), ref, max_angle=1_001_100.0)
    gpu = E.sinusoidal_diagnostics(sinusoidal_encoding(1000, 51, device="cuda"), 1e4, 20, 64)
    cpu = E.sinusoidal_diagnostics(sinusoidal_encoding(1000, 51), 1e4, 20, 64)
    for name in ("norms", "offset_lo", "offset_hi", "dot_blocks", "distance_blocks"):
        assert (getattr(gpu, name).cpu() - getattr(cpu, name)).abs().max().item() < 1e-9, name


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_round_once_is_a_single_rounding(dtype):
    """Just above / below a half-format midpoint that float32 would turn into an exact tie: rounded to nearest,
    where a plain float64 -> float32 -> half conversion rounds twice and goes the wrong way."""
    bits = FORMAT[dtype][0]
    mid = 1.0 + 2.0**-bits  # halfway between 1 and the next half-format number
    up, down = mid + 2.0**-30, mid - 2.0**-30
    x = torch.tensor([up, down, -up, -down], dtype=torch.float64)
    want = [1 + 2.0 ** (1 - bits), 1.0, -(1 + 2.0 ** (1 - bits)), -1.0]
    assert E.round_once(x, dtype).double().tolist() == want
    assert x.to(torch.float32).to(dtype).double().tolist() != want  # what it fixes
    rand = torch.as_tensor(np.random.default_rng(1).uniform(-1, 1, 100_000))
    err = (E.round_once(rand, dtype).double() - rand).abs().numpy()
    assert (err <= half_ulp(rand.numpy(), dtype)).all()
