"""pipeline.encoding against the seed notebook's numpy formula, closed forms and scipy."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.spatial.distance import cdist

from pipeline.device import resolve_device
from pipeline.encoding import (
    distance_matrix,
    dot_product_matrix,
    expected_norm,
    inverse_frequencies,
    offset_distance_closed_form,
    offset_distances,
    position_norms,
    sinusoidal_encoding,
)
from pipeline.errors import PipelineError

CUDA = torch.cuda.is_available()
MPS = getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available()


def notebook_pe(n: int, d: int) -> np.ndarray:
    """The seed notebook's positional encoding, verbatim (float64)."""
    angle = np.arange(n)[:, None] / np.power(10000, (2 * (np.arange(d)[None, :] // 2)) / np.float32(d))
    angle[:, 0::2] = np.sin(angle[:, 0::2])
    angle[:, 1::2] = np.cos(angle[:, 1::2])
    return angle


def reference_pe(positions: np.ndarray, d: int, base: float = 10000.0) -> np.ndarray:
    """The same formula in float64 for arbitrary positions and any d (odd d: last column is a sine)."""
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
    assert np.abs(pe.numpy().astype(np.float64) - notebook_pe(n, d)).max() < 1e-6


@pytest.mark.parametrize("n,d", [(100, 100), (100, 50)])
def test_float64_matches_notebook(n, d):
    """float64 output equals the notebook's matrix to ~1e-12 and keeps dtype float64."""
    pe = sinusoidal_encoding(n, d, dtype=torch.float64)
    assert pe.dtype == torch.float64
    assert np.abs(pe.numpy() - notebook_pe(n, d)).max() < 1e-12


def test_seed_norm_of_position_34():
    """||PE(34)|| at d=100 reproduces the notebook's 7.0710678."""
    norms = position_norms(sinusoidal_encoding(100, 100))
    assert norms.shape == (100,)
    assert abs(float(norms[34]) - 7.0710678) < 5e-8


def test_seed_distance_70_72():
    """||PE(70) - PE(72)|| at d=100 reproduces the notebook's 3.2668781."""
    pe = sinusoidal_encoding(100, 100).double()
    dist = float(torch.linalg.vector_norm(pe[70] - pe[72]))
    assert abs(dist - 3.2668781) < 5e-8


def test_inverse_frequencies_closed_form():
    """w_i = 1 / 10000^(2i/d), one per sin/cos pair (ceil(d/2) of them)."""
    for d in (100, 7):
        w = inverse_frequencies(d, 10000.0)
        assert w.dtype == torch.float64 and w.shape == (math.ceil(d / 2),)
        assert np.abs(w.numpy() - reference_freqs(d)).max() < 1e-15


def test_other_base():
    """The base parameter is honoured (not hard-wired to 10000)."""
    pe = sinusoidal_encoding(30, 16, base=100.0, dtype=torch.float64)
    assert np.abs(pe.numpy() - reference_pe(np.arange(30), 16, base=100.0)).max() < 1e-12
    assert np.abs(pe.numpy() - reference_pe(np.arange(30), 16)).max() > 1e-2


# ---------------------------------------------------------------- closed forms

@pytest.mark.parametrize("d", [100, 50, 8])
def test_row_norms_are_sqrt_half_d(d):
    """Every row has norm sqrt(d/2) for even d (each sin/cos pair contributes 1)."""
    assert expected_norm(d) == pytest.approx(math.sqrt(d / 2), abs=1e-15)
    norms32 = position_norms(sinusoidal_encoding(200, d)).numpy()
    norms64 = position_norms(sinusoidal_encoding(200, d, dtype=torch.float64)).numpy()
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
    assert np.abs(cf.numpy() - closed).max() < 1e-12

    lo, hi = offset_distances(sinusoidal_encoding(100, d, dtype=torch.float64), 20)
    assert lo.shape == hi.shape == (20,)
    assert np.abs(lo.numpy() - closed).max() < 1e-9
    assert np.abs(hi.numpy() - closed).max() < 1e-9
    assert (hi - lo).max() < 1e-9

    lo32, hi32 = offset_distances(sinusoidal_encoding(100, d), 20)
    assert np.abs(lo32.numpy() - closed).max() < 1e-5
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
    assert np.abs(dist - ref).max() < 1e-9
    assert np.abs(dist - dist.T).max() < 1e-12  # symmetric up to BLAS rounding of the Gram matrix
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
    assert np.abs(dist - ref).max() < 1e-5


def test_distance_and_dot_product_are_toeplitz():
    """Both matrices depend only on a - b (even d): every diagonal is constant and equals the closed form."""
    n, d = 80, 50
    pe = sinusoidal_encoding(n, d, dtype=torch.float64)
    dist, gram = distance_matrix(pe).numpy(), dot_product_matrix(pe).numpy()
    w = reference_freqs(d)
    for k in range(-(n - 1), n):
        diag_d, diag_g = np.diagonal(dist, offset=k), np.diagonal(gram, offset=k)
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
    assert np.abs(pe.numpy() - ref).max() < 1e-12
    last_w = 1.0 / 10000 ** ((d - 1) / d)
    assert np.abs(pe[:, -1].numpy() - np.sin(np.arange(n) * last_w)).max() < 1e-12
    assert float(pe[0, -1]) == 0.0  # sin(0), not cos(0)
    pe32 = sinusoidal_encoding(n, d)
    assert np.abs(pe32.numpy().astype(np.float64) - ref).max() < 1e-6


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
    assert np.abs(pe[n - 50:].numpy().astype(np.float64) - ref).max() < 1e-6
    # the test can tell: the same formula with float32 angles misses the reference by far more than 1e-6
    i = np.arange(d)
    angle32 = rows.astype(np.float32)[:, None] * (1.0 / np.power(np.float32(10000), (2 * (i // 2)) / np.float32(d))).astype(np.float32)
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


@pytest.mark.skipif(not CUDA, reason="needs CUDA")
def test_resolve_device_auto_prefers_cuda():
    """'auto' picks CUDA when it is there."""
    assert resolve_device("auto").type == "cuda"


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
