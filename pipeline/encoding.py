"""Sinusoidal positional encoding and its diagnostics, in torch on any device.

PE(pos, 2i) = sin(pos / base^(2i/d)),  PE(pos, 2i+1) = cos(pos / base^(2i/d))   (interleaved layout)

Angles are computed in float64 (float32 where the device lacks it) and rounded to the output dtype
only at the end: float32 angles lose ~5e-4 absolute at 4k positions.
"""
from __future__ import annotations

import math

import torch

from pipeline.device import float64_capable


def inverse_frequencies(d_model: int, base: float, device: torch.device | None = None) -> torch.Tensor:
    """(ceil(d_model/2),) frequencies w_i = 1 / base^(2i/d) in float64 (float32 on MPS)."""
    dtype = float64_capable(torch.device(device or "cpu"))
    two_i = torch.arange(0, d_model, 2, device=device, dtype=dtype)
    return 1.0 / torch.pow(torch.tensor(float(base), dtype=dtype, device=device), two_i / d_model)


def sinusoidal_encoding(max_len: int, d_model: int, base: float = 10000.0, *,
                        device: torch.device | str | None = None,
                        dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """(max_len, d_model) matrix with PE[pos, 2i] = sin(pos w_i), PE[pos, 2i+1] = cos(pos w_i).

    Odd d_model: the last column is a sine. Angles in float64, cast to `dtype` at the end.
    """
    if max_len < 1 or d_model < 1:
        raise ValueError(f"max_len ({max_len}) and d_model ({d_model}) must be >= 1")
    device = torch.device(device or "cpu")
    w = inverse_frequencies(d_model, base, device)
    pos = torch.arange(max_len, device=device, dtype=w.dtype)
    angles = pos[:, None] * w[None, :]                       # (max_len, ceil(d/2))
    pe = torch.empty(max_len, d_model, device=device, dtype=w.dtype)
    pe[:, 0::2] = torch.sin(angles)
    pe[:, 1::2] = torch.cos(angles[:, : d_model // 2])
    return pe.to(dtype)


def offset_distance_closed_form(offsets: torch.Tensor, d_model: int, base: float) -> torch.Tensor:
    """||PE(p) - PE(p+k)|| for each k in `offsets` (independent of p): sqrt(sum_i 2 - 2 cos(k w_i)).

    Exact for even d_model (sin/cos pairs); for odd d_model the unpaired last sine makes it depend
    on p, and this is the value for its paired columns plus the mean of the last one.
    """
    w = inverse_frequencies(d_model, base, offsets.device)
    k = offsets.to(w.dtype)[:, None]
    paired = (2.0 - 2.0 * torch.cos(k * w[: d_model // 2])).sum(dim=1)
    if d_model % 2:
        paired = paired + (1.0 - torch.cos(k[:, 0] * w[-1]))
    return paired.sqrt()


def position_norms(pe: torch.Tensor) -> torch.Tensor:
    """(n,) Euclidean norm of every row, accumulated in float64 (float32 on MPS)."""
    return torch.linalg.vector_norm(pe.to(float64_capable(pe.device)), dim=1)


def offset_distances(pe: torch.Tensor, max_offset: int) -> tuple[torch.Tensor, torch.Tensor]:
    """min and max over p of ||PE(p) - PE(p+k)|| for k = 1..K, K = min(max_offset, n-1).

    Returns (K,) tensors lo, hi; their spread hi - lo is zero exactly when the distance depends only on k.
    """
    x = pe.to(float64_capable(pe.device))
    n = x.shape[0]
    lo, hi = [], []
    for k in range(1, min(max_offset, n - 1) + 1):
        dist = torch.linalg.vector_norm(x[k:] - x[:-k], dim=1)     # (n - k,)
        lo.append(dist.min())
        hi.append(dist.max())
    if not lo:
        empty = torch.empty(0, dtype=x.dtype, device=x.device)
        return empty, empty
    return torch.stack(lo), torch.stack(hi)


def dot_product_matrix(pe: torch.Tensor) -> torch.Tensor:
    """(n, n) PE PE^T, accumulated in float64 (float32 on MPS)."""
    x = pe.to(float64_capable(pe.device))
    return x @ x.T


def distance_matrix(pe: torch.Tensor, gram: torch.Tensor | None = None) -> torch.Tensor:
    """(n, n) Euclidean distances ||PE(a) - PE(b)|| from the Gram matrix: never negative under the root, zero diagonal."""
    gram = dot_product_matrix(pe) if gram is None else gram
    sq = torch.diagonal(gram)
    dist2 = (sq[:, None] + sq[None, :] - 2.0 * gram).clamp_min_(0.0)
    dist = dist2.sqrt_()
    dist = 0.5 * (dist + dist.T)  # x @ x.T is symmetric only up to rounding
    dist.fill_diagonal_(0.0)
    return dist


def expected_norm(d_model: int) -> float:
    """sqrt(d/2): the norm of every row for even d_model (each sin/cos pair contributes 1)."""
    return math.sqrt(d_model / 2)
