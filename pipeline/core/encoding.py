"""Sinusoidal positional encodings and their diagnostics, in torch on any device.

d = d_model, m = d // 2 sin/cos pairs, h = ceil(d / 2) frequencies w_i = base^(-2i/d):

    interleaved  (the paper, the notebook):  PE[p, 2i] = sin(p w_i),  PE[p, 2i+1] = cos(p w_i)
    concatenated (tensor2tensor, fairseq):   PE[p, i]  = sin(p w_i),  PE[p, h+i]  = cos(p w_i)

For odd d the unpaired last frequency gives one more sine column (the last column when interleaved, the
last of the sine block when concatenated). The concatenated layout is a column permutation of the
interleaved one, so norms, dot products and distances do not depend on the layout. (tensor2tensor and
fairseq also space their frequencies as base^(-i/(m-1)) and pad odd d with a zero column: only their
column layout is offered here.)

Accuracy: sin(p w_i) and cos(p w_i) are computed in float64 (pipeline.core.sinusoid: correctly rounded
frequencies, angle addition from portable sin/cos tables, within a few ulp) and only the result is rounded (once:
see `round_once`) to the output dtype, so float32/float16/bfloat16 are within their own rounding of the float64
reference at any position (float32 angles are off by 5e-4 at 4k positions). Every value has the same bits on every
CPU and GPU (pipeline.core.portable). Devices without float64 (MPS) get the encoding and its diagnostics computed on
the CPU in float64: the same values as on the CPU.

Diagnostics. Over the m pairs the dot products and distances depend only on k = a - b (Toeplitz):

    dot(k) = sum_i cos(k w_i),    dist2(k) = sum_i 2 - 2 cos(k w_i)  (= ||PE(a) - PE(b)||^2 for even d)

For odd d the unpaired sine u(p) = sin(p w_{h-1}) adds u(a) u(b) to the dot products and (u(a) - u(b))^2
to the squared distances: Toeplitz plus a rank-one term, still exact from O(n) numbers.
`sinusoidal_profiles` computes these 1-D profiles, `profile_matrices` expands them to full matrices and
`profile_block_means` to exact block averages (the figures' resolution) with no n x n work.
The generic path (`dot_product_matrix`, `distance_matrix`, `block_means`, `band_gram`, `offset_distances`)
takes any encoding matrix (learned, user-supplied) and uses float64 matrix products made exact
(`portable.exact_matmul`). Sums go through `portable.tree_sum` (a fixed order): the diagnostics, like the table, have
the same bits on every CPU, thread count and GPU.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import torch

from pipeline.base.progress import Progress
from pipeline.core import portable, sinusoid
from pipeline.core.choices import LAYOUTS
from pipeline.core.device import float64_capable, has_float64
from pipeline.core.memory import check_fits


# Squared distances below this share of |x_a|^2 + |x_b|^2 lose more than ~6 digits to cancellation in
# |x_a|^2 + |x_b|^2 - 2 x_a.x_b: they are recomputed directly from x_a - x_b.
_REFINE_BELOW = {torch.float64: 1e-6, torch.float32: 1e-2}


def _work_device(device: torch.device | str | None) -> torch.device:
    """Where to compute in float64: the device itself, or the CPU for devices without float64 (MPS)."""
    device = torch.device(device or "cpu")
    return device if has_float64(device) else torch.device("cpu")


def _check_sizes(n: int, d_model: int) -> None:
    if n < 1 or d_model < 1:
        raise ValueError(f"the number of positions ({n}) and d_model ({d_model}) must be >= 1")


def check_layout(layout: str) -> str:
    if layout not in LAYOUTS:
        raise ValueError(f"layout {layout!r} is not one of {', '.join(LAYOUTS)}")
    return layout


# ---------------------------------------------------------------- the encoding


def inverse_frequencies(d_model: int, base: float, device: torch.device | str | None = None) -> torch.Tensor:
    """(ceil(d_model/2),) frequencies w_i = base^(-2i/d), float64, each correctly rounded
    (pipeline.core.sinusoid.frequencies); float32 once moved to MPS."""
    w = torch.from_numpy(sinusoid.frequencies(d_model, base))
    return w.to(torch.device(device or "cpu"), float64_capable(device))


def _float64(x: torch.Tensor) -> torch.Tensor:
    """x in float64 where float64 work happens: its device, or the CPU for devices without float64 (MPS)."""
    return x.to(_work_device(x.device), torch.float64)


def round_once(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """x (float64) rounded to nearest in `dtype`, a single rounding.

    torch converts float64 to float16/bfloat16 through float32, which rounds twice (off by up to half a
    float32 ulp more). Rounding to float32 *to odd* first (truncate, then set the last bit if inexact) makes
    the second rounding exact, as float32 carries at least two more bits than either half format.
    """
    if dtype not in (torch.float16, torch.bfloat16):
        if x.device.type == "cpu" and dtype == torch.float32:  # numpy's cast: the same rounding, no thread start-up
            return torch.from_numpy(x.numpy().astype(np.float32))
        return x.to(dtype)
    x32 = x.to(torch.float32)
    bits = x32.view(torch.int32)
    bits = torch.where(x32.abs().double() > x.abs(), bits - 1, bits)  # round-to-nearest went up: truncate
    bits = torch.where(bits.view(torch.float32).double() != x, bits | 1, bits)
    return bits.view(torch.float32).to(dtype)


def sinusoidal_encoding(
    max_len: int,
    d_model: int,
    base: float = 10000.0,
    *,
    layout: str = "interleaved",
    start: int = 0,
    device: torch.device | str | None = None,
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """(max_len, d_model) encoding of positions start .. start + max_len - 1 in `layout` (see the module doc).

    Angles in float64 (on the CPU for devices without float64), rounded once to `dtype` at the end.
    """
    _check_sizes(max_len, d_model)
    check_layout(layout)
    if start < 0:
        raise ValueError(f"start ({start}) must be >= 0")
    device = torch.device(device or "cpu")
    work = _work_device(device)
    w = inverse_frequencies(d_model, base, work)
    h, m = w.numel(), d_model // 2
    pe = torch.empty(max_len, d_model, dtype=dtype, device=work)
    sin_cols, cos_cols = (pe[:, 0::2], pe[:, 1::2]) if layout == "interleaved" else (pe[:, :h], pe[:, h:])
    # rows at a time, whole blocks of sinusoid.ROW_BLOCK (each chunk recomputes one block's table): bounded
    # temporaries on the CPU, fewer launches on a GPU (an entry does not depend on its chunk)
    blocks = max(4, (2**20 if work.type == "cpu" else 2**24) // (h * sinusoid.ROW_BLOCK))
    rows_at_once = blocks * sinusoid.ROW_BLOCK
    for first in range(0, max_len, rows_at_once):
        rows = slice(first, min(max_len, first + rows_at_once))
        sin, cos = sinusoid.sin_cos_rows(start + first, rows.stop - first, w)
        sin_cols[rows] = round_once(sin, dtype)
        cos_cols[rows] = round_once(cos[:, :m], dtype)
    return pe.to(device)


def expected_norm(d_model: int) -> float:
    """sqrt(d/2): the norm of every row for even d_model (each sin/cos pair contributes 1)."""
    return math.sqrt(d_model / 2)


def offset_distance_closed_form(offsets: torch.Tensor, d_model: int, base: float) -> torch.Tensor:
    """||PE(p) - PE(p+k)|| for each k in `offsets` (independent of p): sqrt(sum_i 4 sin^2(k w_i / 2)).

    Exact for even d_model (sin/cos pairs); for odd d_model the unpaired last sine makes it depend
    on p, and this is the value for its paired columns plus the mean over p of the last one.
    """
    w = inverse_frequencies(d_model, base, _work_device(offsets.device))
    k = offsets.to(w.device, w.dtype)[:, None]
    chord = 2.0 * portable.sin_cos(0.5 * k * w[: d_model // 2])[0]
    paired = portable.tree_sum(chord * chord, axis=1)
    if d_model % 2:
        last = portable.sin_cos(0.5 * k[:, 0] * w[-1])[0]
        paired = paired + 2.0 * (last * last)  # mean of (sin a - sin b)^2
    return paired.sqrt().to(offsets.device, float64_capable(offsets.device))


# ---------------------------------------------------------------- structure: 1-D profiles


class Profiles(NamedTuple):
    """The dot-product and distance matrices of a sinusoidal encoding of n positions, as O(n) numbers.

    dot_products[a, b] = dot[|a-b|] + u[a] u[b],  squared distances[a, b] = dist2[|a-b|] + (u[a] - u[b])^2,
    with u = `unpaired` for odd d and no u term for even d. All float64 (n,) on the work device.
    """

    dot: torch.Tensor  # sum over the sin/cos pairs of cos(k w_i), k = 0 .. n-1
    dist2: torch.Tensor  # sum over the pairs of 2 - 2 cos(k w_i): >= 0, exactly 0 at k = 0
    unpaired: torch.Tensor | None  # sin(p w_{h-1}), p = 0 .. n-1, for odd d; None for even d

    @property
    def toeplitz(self) -> bool:
        """True when both matrices depend on a - b only (even d)."""
        return self.unpaired is None

    @property
    def distance(self) -> torch.Tensor:
        """(n,) ||PE(p) - PE(p+k)|| over the pairs: the distance profile (exact for even d)."""
        return self.dist2.sqrt()


def sinusoidal_profiles(
    n: int, d_model: int, base: float = 10000.0, device: torch.device | str | None = None
) -> Profiles:
    """1-D profiles of the n x n dot-product and distance matrices of the sinusoidal encoding (any layout).

    dot(k) = sum_i cos(k w_i) for k = q B + r is ([cos qBw, sin qBw] @ [cos rw, -sin rw]^T)[q, r]: one small
    float64 matrix product (exact: portable.exact_matmul), ((n/B + B) m portable sin/cos). dist2 = 2m - 2 dot:
    absolute error ~ m * 1e-16.
    """
    _check_sizes(n, d_model)
    work = _work_device(device)
    w_all = inverse_frequencies(d_model, base, work)
    m = d_model // 2
    w = w_all[:m]
    if m == 0:
        dot = torch.zeros(n, dtype=torch.float64, device=work)
    else:
        B = math.isqrt(n) + 1
        nq = -(-n // B)
        q_angle = (B * torch.arange(nq, dtype=torch.float64, device=work))[:, None] * w
        r_angle = torch.arange(B, dtype=torch.float64, device=work)[:, None] * w
        sin_q, cos_q = portable.sin_cos(q_angle)
        sin_r, cos_r = portable.sin_cos(r_angle)
        left = torch.cat([cos_q, sin_q], dim=1)  # (nq, 2m)
        right = torch.cat([cos_r, -sin_r], dim=1)  # (B, 2m)
        # a row at a time: bigger products go to OpenBLAS's threads (docs/benchmarks-measurements.md#the-numerical-core)
        dot = portable.exact_matmul(left[:, None], right.T).reshape(-1)[:n]
        dot[0] = m  # cos(0) = 1, exactly
    dist2 = (2.0 * m - 2.0 * dot).clamp_min_(0.0)
    dist2[0] = 0.0
    unpaired = None
    if d_model % 2:
        unpaired = portable.sin_cos(torch.arange(n, dtype=torch.float64, device=work) * w_all[-1])[0]
    return Profiles(dot, dist2, unpaired)


def _symmetric_extension(profile: torch.Tensor) -> torch.Tensor:
    """(2n-1,) v with v[j] = profile[|j - (n-1)|], so that T[a, b] = profile[|a-b|] = v[n-1-a+b]."""
    return torch.cat([profile.flip(0), profile[1:]])


TOEPLITZ_BLOCK = 2**22  # elements of the full matrices copied out at once (toeplitz_rows)


def toeplitz_block_elements(n: int) -> int:
    """Elements of the temporary block toeplitz_rows holds on a GPU while it copies out an (n, n) matrix."""
    return min(n, max(1, TOEPLITZ_BLOCK // max(1, n))) * n


def toeplitz_rows(profile: torch.Tensor, rows: slice | None = None, dtype: torch.dtype | None = None) -> torch.Tensor:
    """Rows a0 .. a1-1 (all by default) of the symmetric Toeplitz matrix T[a, b] = profile[|a-b|]: (a1-a0, n)."""
    n = profile.numel()
    a0, a1, _ = (rows or slice(0, n)).indices(n)
    v = _symmetric_extension(profile.to(dtype or profile.dtype))
    dtype, v = v.dtype, v.view(getattr(torch, f"int{8 * v.element_size()}"))  # its bits: numpy has no bfloat16
    cpu = v.device.type == "cpu"
    out = torch.from_numpy(np.empty((a1 - a0, n), v.numpy().dtype)) if cpu else v.new_empty((a1 - a0, n))
    # Rows in reverse order form a Hankel matrix, a (1, 1)-strided view of v, copied out TOEPLITZ_BLOCK elements at a
    # time: on the CPU numpy reads it backwards into numpy's memory (on huge pages, written at the memory's bandwidth:
    # docs/benchmarks-measurements.md#the-numerical-core), elsewhere a flip copies it (CUDA's flip of a view beyond
    # 2^31 elements reads out of bounds: benchmarks/results/gpu-check-cuda-nvidia-h200.json; blocks bound its copy).
    step = max(1, TOEPLITZ_BLOCK // max(1, n))  # rows
    for r0 in range(a0, a1, step):
        r1 = min(a1, r0 + step)
        block, hankel = out[r0 - a0 : r1 - a0], v[n - r1 :].as_strided((r1 - r0, n), (1, 1))
        np.copyto(block.numpy(), hankel.numpy()[::-1]) if cpu else block.copy_(hankel.flip(0))
    return out.view(dtype)


_FULL_FIX = (
    "ask for block means instead (profile_block_means / block_means: encoding.max_matrix_size) or fewer positions"
)


def full_matrices_bytes(n: int, dtype: torch.dtype = torch.float64, *, odd: bool = False) -> int:
    """Peak bytes `profile_matrices` takes on one device for n positions: the two (n, n) results in `dtype` and one
    block being copied out (toeplitz_block_elements, a flip's on a GPU); for odd d (`odd`) their float64 work too
    (converting one keeps both copies for a moment) and one chunk of 2^22 float64 differences."""
    s = torch.empty(0, dtype=dtype).element_size()
    if not odd:
        return 2 * s * n * n + s * toeplitz_block_elements(n)
    return (16 if s == 8 else 8 + 2 * s) * n * n + 8 * 2**22 + 8 * toeplitz_block_elements(n)


def _exact_gram_bytes(n: int, d: int) -> int:
    """Peak bytes of portable.exact_matmul(x, x.T) for x (n, d): the result, the partial product being added and
    their sum (three float64 (n, n)), and up to four float64 parts of each operand (eight (n, d))."""
    return 8 * (3 * n * n + 8 * n * d)


def _check_full(nbytes: int, n: int, device: torch.device, what: str) -> None:
    check_fits(nbytes, device, f"the full {n} x {n} {what}", _FULL_FIX)


def profile_matrices(
    profiles: Profiles, dtype: torch.dtype = torch.float64, device: torch.device | str | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """The full (n, n) dot-product and distance matrices from the profiles: exact, symmetric, zero diagonal.

    O(n^2) memory writes and no O(n^2 d) work. Computed in float64 and rounded once to `dtype` when the
    unpaired column of odd d needs a correction; even d expands the (rounded) profiles directly. A PipelineError
    (cause and fix) before anything is allocated when they do not fit in the device's memory (pipeline.core.memory).
    """
    device = torch.device(device or profiles.dot.device)
    u = profiles.unpaired
    n, work = profiles.dot.numel(), profiles.dot.device
    what = "dot-product and distance matrices"
    if u is None or work == device:
        _check_full(full_matrices_bytes(n, dtype, odd=u is not None), n, device, what)
    else:
        _check_full(full_matrices_bytes(n, torch.float64, odd=True), n, work, what + " (their float64 work)")
        _check_full(full_matrices_bytes(n, dtype), n, device, what)
    if u is None:
        dot = toeplitz_rows(profiles.dot.to(device, dtype))
        dist = toeplitz_rows(profiles.distance.to(device, dtype))
        return dot, dist
    dot = toeplitz_rows(profiles.dot)
    step = max(1, 2**22 // dot.shape[1])  # rows at a time: the rank-one term's temporaries stay small
    for a0 in range(0, dot.shape[0], step):
        dot[a0 : a0 + step].add_(u[a0 : a0 + step, None] * u[None, :])
    dot = dot.to(device, dtype)
    dist = toeplitz_rows(profiles.dist2)
    for a0 in range(0, dist.shape[0], step):
        block = dist[a0 : a0 + step]
        block.add_((u[a0 : a0 + step, None] - u[None, :]).square_()).sqrt_()
    dist.fill_diagonal_(0.0)
    return dot, dist.to(device, dtype)


def block_factor(n: int, max_size: int) -> int:
    """Block side f so that n // f <= max_size (as pipeline.figures.drawing.block_average chooses it)."""
    return max(1, -(-n // max_size))


def _toeplitz_block_means(profile: torch.Tensor, factor: int) -> torch.Tensor:
    """(M,) c with c[|I-J|] the exact mean of T[a, b] = profile[|a-b|] over the f x f block (I, J), M = n // f.

    The block (I, J) holds f - |t| pairs with a - b = (I - J) f + t for t = -(f-1) .. f-1: a triangle-weighted
    sum of 2f - 1 profile values per block offset.
    """
    n, f = profile.numel(), factor
    M = n // f
    v = _symmetric_extension(profile)
    t = torch.arange(-(f - 1), f, device=profile.device)
    index = (n - 1) + f * torch.arange(M, device=profile.device)[:, None] + t[None, :]  # (M, 2f - 1)
    weights = (f - t.abs()).to(profile.dtype) / f**2
    return portable.tree_sum(v[index] * weights, axis=1)


def profile_block_means(profiles: Profiles, factor: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Exact f x f block means of the dot-product and distance matrices: two (M, M) float64, M = n // f.

    Blocks cover positions 0 .. M f - 1 (the last n mod f positions are left out, as figures.block_average
    does). Even d: O(n f) work from the profiles. Odd d: the dot products stay O(n f) (the mean of u(a) u(b)
    over a block is the product of block means of u); the distances are not a function of a - b any more,
    so they are evaluated elementwise from the profiles (O(n^2), still no O(n^2 d) products).
    """
    f = factor
    n = profiles.dot.numel()
    M = n // f
    dot = toeplitz_rows(_toeplitz_block_means(profiles.dot, f))
    u = profiles.unpaired
    if u is None:
        return dot, toeplitz_rows(_toeplitz_block_means(profiles.distance, f))
    u_mean = portable.tree_sum(u[: M * f].reshape(M, f), axis=1) / f
    dot = dot + u_mean[:, None] * u_mean[None, :]
    dist = torch.empty(M, M, dtype=torch.float64, device=u.device)
    step = max(1, 2**22 // (f * n))  # block rows per chunk
    progress = Progress("encode: block means of the distances, block rows", M)
    for i0 in range(0, M, step):
        progress.update(i0)
        i1 = min(M, i0 + step)
        rows = slice(i0 * f, i1 * f)
        d2 = toeplitz_rows(profiles.dist2, rows)[:, : M * f]
        d2.add_((u[rows, None] - u[None, : M * f]).square_()).sqrt_()
        dist[i0:i1] = _block_mean(d2, f)
    # the diagonal blocks' means include the exact zeros of a == b: nothing to fix
    return dot, dist


def _block_mean(rows: torch.Tensor, f: int) -> torch.Tensor:
    """(R f, M f) -> (R, M): the mean of each f x f block, summed in a fixed order (portable.tree_sum)."""
    R, M = rows.shape[0] // f, rows.shape[1] // f
    blocks = rows.reshape(R, f, M, f)
    return portable.tree_sum(portable.tree_sum(blocks, axis=3), axis=1) / (f * f)


# ---------------------------------------------------------------- generic path: any encoding matrix


def dot_product_matrix(pe: torch.Tensor) -> torch.Tensor:
    """(n, n) PE PE^T in float64, exact before its final rounding (portable.exact_matmul; on the CPU for MPS);
    refused (PipelineError) when it cannot fit."""
    n, d = pe.shape
    _check_full(_exact_gram_bytes(n, d), n, _work_device(pe.device), "dot-product matrix")
    x = _float64(pe)
    return portable.exact_matmul(x, x.T)


def _refine(
    dist2: torch.Tensor, sq_a: torch.Tensor, sq_b: torch.Tensor, x_a: torch.Tensor, x_b: torch.Tensor
) -> torch.Tensor:
    """Recompute directly, as ||x_a - x_b||^2, the squared distances that cancellation may have spoiled.

    dist2: (r, c) from |x_a|^2 + |x_b|^2 - 2 x_a.x_b; sq_a (r,), sq_b (c,); x_a (r, d), x_b (c, d). In place.
    Suspects are the entries below _REFINE_BELOW * 2 max |x|^2 (a superset of the entries below that share
    of their own |x_a|^2 + |x_b|^2, found with a single comparison).
    """
    bound = _REFINE_BELOW.get(dist2.dtype, 1e-2) * 2.0 * float(torch.maximum(sq_a.max(), sq_b.max()))
    a, b = (dist2 < bound).nonzero(as_tuple=True)
    for s in range(0, a.numel(), 4096):
        i, j = a[s : s + 4096], b[s : s + 4096]
        diff = x_a[i] - x_b[j]
        dist2[i, j] = portable.tree_sum(diff * diff, axis=1)
    return dist2


def distance_matrix(pe: torch.Tensor, gram: torch.Tensor | None = None) -> torch.Tensor:
    """(n, n) Euclidean distances ||PE(a) - PE(b)|| of any matrix, from its Gram matrix, numerically careful.

    In float64 (on the CPU for MPS), the Gram matrix exact before its rounding; entries where
    |x_a|^2 + |x_b|^2 - 2 x_a.x_b may cancel are recomputed from the differences; never negative under the root;
    symmetric; exact zeros on the diagonal. Refused (PipelineError) when its peak (the exact Gram matrix's, a
    copy and a boolean (n, n)) cannot fit.
    """
    n, d = pe.shape
    _check_full(_exact_gram_bytes(n, d) + 9 * n * n, n, _work_device(pe.device), "distance matrix")
    x = _float64(pe)
    dist2 = portable.exact_matmul(x, x.T) if gram is None else gram.to(x.device, x.dtype, copy=True)
    sq = torch.diagonal(dist2).clone()
    dist2.mul_(-2.0).add_(sq[:, None]).add_(sq[None, :])
    dist = _refine(dist2, sq, sq, x, x).clamp_min_(0.0).sqrt_()
    dist = dist.add(dist.T).mul_(0.5)  # x @ x.T is symmetric only up to rounding
    dist.fill_diagonal_(0.0)
    return dist


def block_means(pe: torch.Tensor, factor: int) -> tuple[torch.Tensor, torch.Tensor]:
    """f x f block means of the dot-product and distance matrices of any (n, d) matrix: two (M, M), M = n // f.

    Computed a band of rows at a time (O(n f d) memory, never n x n), exact float64 products, careful
    distances as `distance_matrix`. Covers positions 0 .. M f - 1, as `profile_block_means`.
    """
    x = _float64(pe)
    f = factor
    M = x.shape[0] // f
    x = x[: M * f]
    sq = portable.tree_sum(x * x, axis=1)
    dot = torch.empty(M, M, dtype=x.dtype, device=x.device)
    dist = torch.empty_like(dot)
    step = max(1, 2**22 // (f * M * f))
    progress = Progress("encode: block means, block rows", M)
    for i0 in range(0, M, step):
        progress.update(i0)
        i1 = min(M, i0 + step)
        rows = slice(i0 * f, i1 * f)
        gram = portable.exact_matmul(x[rows], x.T)  # (rows, M f)
        dist2 = (-2.0 * gram).add_(sq[rows, None]).add_(sq[None, :])
        _refine(dist2, sq[rows], sq, x[rows], x).clamp_min_(0.0)
        diagonal = torch.arange(rows.start, rows.stop, device=x.device)
        dist2[diagonal - rows.start, diagonal] = 0.0
        dot[i0:i1] = _block_mean(gram, f)
        dist[i0:i1] = _block_mean(dist2.sqrt_(), f)
    return dot, 0.5 * (dist + dist.T)


def band_gram(pe: torch.Tensor, max_offset: int, chunk_elems: int | None = None) -> torch.Tensor:
    """(n, K+1) band of the Gram matrix: band[p, k] = PE(p) . PE(p+k) (0 where p + k >= n), K = max_offset, float64
    and exact before its rounding (portable.exact_band; on the CPU for MPS): O(n (K + 8) d) work, chunk_elems entries at
    a time (2^18 on the CPU, cache-sized: docs/benchmarks-measurements.md#the-numerical-core; 2^22 on a GPU)."""
    pe = pe.to(_work_device(pe.device), torch.promote_types(pe.dtype, torch.float32))  # exactly: numpy lacks bfloat16
    return portable.exact_band(pe, max_offset + 1, chunk_elems or (2**18 if pe.device.type == "cpu" else 2**22))


def offset_distances(pe: torch.Tensor, max_offset: int) -> tuple[torch.Tensor, torch.Tensor]:
    """min and max over p of ||PE(p) - PE(p+k)|| for k = 1..K, K = min(max_offset, n-1), any matrix.

    Returns (K,) tensors lo, hi; their spread hi - lo is zero exactly when the distance depends only on k.
    From the Gram band (float64), with the cancelling entries recomputed from the differences.
    """
    return _offsets_from_band(pe, band_gram(pe, max(0, min(max_offset, pe.shape[0] - 1))))


def _offsets_from_band(pe: torch.Tensor, band: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(K,) min and max over p of ||PE(p) - PE(p+k)|| from band = band_gram(pe, K), all k at once."""
    n, K = band.shape[0], band.shape[1] - 1
    sq = band[:, 0]
    sq_ahead = torch.cat([sq, sq.new_zeros(K)]).as_strided((n, K), (1, 1), 1)  # sq[p + k], k = 1..K
    dist2 = sq[:, None] + sq_ahead - 2.0 * band[:, 1:]  # (n, K)
    valid = (torch.arange(n, device=sq.device)[:, None] + torch.arange(1, K + 1, device=sq.device)) < n
    suspect = valid & (dist2 < _REFINE_BELOW.get(dist2.dtype, 1e-2) * (sq[:, None] + sq_ahead))
    p, k = suspect.nonzero(as_tuple=True)
    if len(p):
        diff = pe[p].to(dist2) - pe[p + k + 1].to(dist2)
        dist2[p, k] = portable.tree_sum(diff * diff, axis=1)
    dist = dist2.clamp_min_(0.0).sqrt_()
    lo = torch.where(valid, dist, torch.inf).amin(dim=0)
    hi = torch.where(valid, dist, -torch.inf).amax(dim=0)
    return lo, hi


# ---------------------------------------------------------------- everything the encode stage reports


@dataclass
class Diagnostics:
    """Property checks of an actual encoding matrix plus its dot-product / distance matrices."""

    norms: torch.Tensor  # (n,) ||PE(p)|| of the matrix
    offset_lo: torch.Tensor  # (K,) min over p of ||PE(p) - PE(p+k)||, k = 1..K
    offset_hi: torch.Tensor  # (K,) max over p
    offset_closed: torch.Tensor  # (K,) the sinusoidal closed form sqrt(sum_i 2 - 2 cos(k w_i)) for this d, base
    profiles: Profiles | None  # exact 1-D profiles (sinusoidal encodings only)
    dot_blocks: torch.Tensor  # (M, M) f x f block means of PE PE^T
    distance_blocks: torch.Tensor  # (M, M) f x f block means of the distance matrix
    factor: int  # f (1: the blocks are the full matrices)


def _property_checks(pe: torch.Tensor, base: float, max_offset: int):
    """Norms and offset distances of the matrix itself (from its Gram band), and the closed form."""
    n, d = pe.shape
    K = max(0, min(max_offset, n - 1))
    band = band_gram(pe, K)
    closed = offset_distance_closed_form(torch.arange(1, K + 1, device=pe.device), d, base)
    return band[:, 0].sqrt(), *_offsets_from_band(pe, band), closed


def sinusoidal_diagnostics(pe: torch.Tensor, base: float, max_offset: int, max_size: int) -> Diagnostics:
    """Property checks on the sinusoidal matrix `pe` (n, d) (norms, offset distances from its Gram band)
    and the dot-product / distance matrices from the closed-form profiles, at most max_size x max_size."""
    n, d = pe.shape
    norms, lo, hi, closed = _property_checks(pe, base, max_offset)
    profiles = sinusoidal_profiles(n, d, base, pe.device)
    factor = block_factor(n, max_size)
    if factor == 1:
        dot, dist = profile_matrices(profiles)
    else:
        dot, dist = profile_block_means(profiles, factor)
    return Diagnostics(norms, lo, hi, closed, profiles, dot, dist, factor)


def matrix_diagnostics(pe: torch.Tensor, base: float, max_offset: int, max_size: int) -> Diagnostics:
    """The same for any encoding matrix (learned, user-supplied): the generic path, O(n^2 d) products in
    float64 a band of rows at a time. offset_closed is the sinusoidal closed form, for comparison."""
    norms, lo, hi, closed = _property_checks(pe, base, max_offset)
    factor = block_factor(pe.shape[0], max_size)
    if factor == 1:
        dot = dot_product_matrix(pe)
        dist = distance_matrix(pe, dot)
    else:
        dot, dist = block_means(pe, factor)
    return Diagnostics(norms, lo, hi, closed, None, dot, dist, factor)
