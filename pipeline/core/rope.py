"""Rotary position embeddings (RoPE, Su et al., RoFormer) and their relative-position diagnostics, in torch.

RoPE does not add a vector to the embedding: it rotates every query and key inside attention. For a head of
even dimension d, h = d / 2 pairs of coordinates are rotated by the angles m theta_i at position m, with the
sinusoid's frequencies theta_i = base^(-2i/d) (`pipeline.core.encoding.inverse_frequencies`). Two layouts
pair the coordinates differently:

    interleaved (RoFormer):               (x[2i], x[2i+1])   rotated by m theta_i
    half_split  (GPT-NeoX, LLaMA code):   (x[i],  x[i + h])  rotated by m theta_i   (`rotate_half`)

Both rotate pair i by R(m theta_i) = [[cos, -sin], [sin, cos]]; they differ by a fixed permutation of the
coordinates, so their scores are the same for correspondingly permuted q, k. As R_m^T R_n = R(n - m), the
score of a query at m and a key at n depends only on m - n:

    (R_m q) . (R_n k) = Re sum_i (q_i conj(k_i)) e^{i (m - n) theta_i},   q_i = q[pair i] as a complex number.

Accuracy: the angles m theta_i are formed in float64, their cos and sin computed portably (pipeline.core.portable:
the same bits on every CPU and GPU) and rounded once (`round_once`) to the output dtype, as the sinusoidal encoding
does; devices without float64 (MPS) get the tables computed on the CPU and copied over. The diagnostics' products and
sums are exact or in a fixed order (portable.exact_matmul, tree_sum), so their bits do not depend on the machine
either.

Base scaling (context extension by a factor s):
    a larger base          theta_i = base'^(-2i/d)
    NTK-aware scaling      base' = base * s^(d / (d - 2))  (the lowest frequency slows down by exactly s, the
                           highest stays)
    position interpolation positions m / s, i.e. every theta_i / s

Long-term decay (RoFormer section 3.4.3): with S_j = sum_{k<j} e^{i delta theta_k} (S_0 = 0), Abel summation
bounds |sum_i h_i e^{i delta theta_i}| <= (max_i |h_{i+1} - h_i|) sum_{j=1}^{h} |S_j|; the paper plots the
relative upper bound (1/h) sum_{j=1}^{h} |S_j| against the relative distance delta = m - n (`decay_bound`).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch

from pipeline.core import portable
from pipeline.core.choices import ROPE_LAYOUTS as LAYOUTS
from pipeline.core.device import float64_capable, has_float64
from pipeline.core.encoding import inverse_frequencies, round_once
from pipeline.core.rope_scaling import ntk_base


def check_head_dim(d_head: int) -> int:
    if d_head < 2 or d_head % 2:
        raise ValueError(f"the head dimension d_head = {d_head} must be even and >= 2 (RoPE rotates pairs)")
    return d_head


def check_layout(layout: str) -> str:
    if layout not in LAYOUTS:
        raise ValueError(f"RoPE layout {layout!r} is not one of {', '.join(LAYOUTS)}")
    return layout


class Scaling(NamedTuple):
    """One RoPE variant: its key, base and the factor positions are divided by (1: none; s: position
    interpolation)."""

    key: str
    base: float
    position_scale: float = 1.0


def scalings(base: float, larger_base: float, scale: float, d_head: int) -> list[Scaling]:
    """The variants the diagnostics compare: the base, a larger base, NTK-aware scaling and position
    interpolation for a context extended s = `scale` times."""
    return [
        Scaling("base", float(base)),
        Scaling("larger_base", float(larger_base)),
        Scaling("ntk", ntk_base(base, scale, d_head)),
        Scaling("pi", float(base), float(scale)),
    ]


def frequencies(
    d_head: int, base: float, position_scale: float = 1.0, device: torch.device | str | None = None
) -> torch.Tensor:
    """(d/2,) float64 theta_i = base^(-2i/d) / position_scale (on the CPU for devices without float64)."""
    check_head_dim(d_head)
    work = torch.device(device or "cpu") if has_float64(device) else torch.device("cpu")
    theta = inverse_frequencies(d_head, base, work)
    return theta / position_scale if position_scale != 1.0 else theta


def angle_tables(
    positions: torch.Tensor,
    d_head: int,
    base: float = 10000.0,
    *,
    position_scale: float = 1.0,
    theta: torch.Tensor | None = None,
    device: torch.device | str | None = None,
    dtype: torch.dtype = torch.float32,
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of m theta_i: two (n, d/2) tensors for positions (n,) (integers or reals).

    The angle is one float64 product per entry (positions / s folded into theta), rounded once to `dtype`. theta:
    (d/2,) inverse frequencies of a scaling (pipeline.core.rope_scaling) instead of base and position_scale."""
    device = torch.device(device or "cpu")
    if theta is None:
        theta = frequencies(d_head, base, position_scale, device)
    else:
        if tuple(theta.shape) != (check_head_dim(d_head) // 2,):
            raise ValueError(f"theta has shape {tuple(theta.shape)}: d_head / 2 = {d_head // 2} frequencies needed")
        theta = theta.to(device if has_float64(device) else torch.device("cpu"), torch.float64)
    angle = positions.to(theta.device, torch.float64)[:, None] * theta[None, :]
    sin, cos = portable.sin_cos(angle)
    return round_once(cos, dtype).to(device), round_once(sin, dtype).to(device)


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, layout: str = "half_split") -> torch.Tensor:
    """x (..., n, d) rotated pair by pair: cos, sin (n, d/2) from `angle_tables`, in x's dtype."""
    check_layout(layout)
    cos, sin = cos.to(x.dtype), sin.to(x.dtype)
    if layout == "interleaved":
        even, odd = x[..., 0::2], x[..., 1::2]
        return torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1).flatten(-2)
    h = x.shape[-1] // 2
    first, second = x[..., :h], x[..., h:]
    return torch.cat((first * cos - second * sin, second * cos + first * sin), dim=-1)


def apply_rope(
    x: torch.Tensor,
    positions: torch.Tensor | None = None,
    base: float = 10000.0,
    *,
    layout: str = "half_split",
    position_scale: float = 1.0,
) -> torch.Tensor:
    """Queries or keys x (..., n, d) rotated to their positions (n,) (default 0 .. n-1), in x's dtype and device."""
    n, d = x.shape[-2], check_head_dim(x.shape[-1])
    if positions is None:
        positions = torch.arange(n)
    cos, sin = angle_tables(positions, d, base, position_scale=position_scale, device=x.device, dtype=x.dtype)
    return rotate(x, cos, sin, layout)


# ---------------------------------------------------------------- diagnostics


def _pairs(x: torch.Tensor, layout: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(..., d) real -> the (..., d/2) real and imaginary parts of its pairs as complex numbers, float64, as `layout`
    pairs them."""
    x = x.to(torch.float64)
    h = x.shape[-1] // 2
    return (x[..., 0::2], x[..., 1::2]) if layout == "interleaved" else (x[..., :h], x[..., h:])


def relative_scores(
    q: torch.Tensor,
    k: torch.Tensor,
    offsets: torch.Tensor,
    base: float = 10000.0,
    *,
    layout: str = "half_split",
    position_scale: float = 1.0,
) -> torch.Tensor:
    """Closed form of the score of q (d,) at m and k (d,) at n for offsets delta = m - n (K,): float64 (K,).

    Re sum_i q_i conj(k_i) e^{i delta theta_i}: what every (m, n) with m - n = delta must give. In real arithmetic
    (w = q_i conj(k_i); Re w e^{i a} = Re w cos a - Im w sin a), summed in a fixed order."""
    theta = frequencies(q.shape[-1], base, position_scale, q.device).to(q.device)
    (qr, qi), (kr, ki) = _pairs(q, layout), _pairs(k, layout)
    w_re, w_im = qr * kr + qi * ki, qi * kr - qr * ki
    angle = offsets.to(theta.device, torch.float64)[:, None] * theta[None, :]
    sin, cos = portable.sin_cos(angle)
    return portable.tree_sum(w_re[None, :] * cos - w_im[None, :] * sin, axis=-1)


class ScoreCheck(NamedTuple):
    scores: torch.Tensor  # (n, n) (R_m q) . (R_n k) for query position m (rows), key position n (columns)
    offsets: torch.Tensor  # (2n - 1,) delta = m - n, from -(n - 1) to n - 1
    closed: torch.Tensor  # (2n - 1,) the closed form for each delta (float64)
    spread: torch.Tensor  # (2n - 1,) max - min over m of the scores with m - n = delta
    error: torch.Tensor  # (2n - 1,) max over m of |score - closed form|


def diagonals(matrix: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """max and min of each diagonal of a square (n, n) matrix, by offset m - n = -(n-1) .. n-1 (two (2n-1,))."""
    n = matrix.shape[0]
    offset = torch.arange(n, device=matrix.device)[:, None] - torch.arange(n, device=matrix.device)[None, :]
    index = (offset + n - 1).flatten()
    values = matrix.flatten()
    hi = torch.full((2 * n - 1,), -torch.inf, dtype=matrix.dtype, device=matrix.device)
    lo = torch.full((2 * n - 1,), torch.inf, dtype=matrix.dtype, device=matrix.device)
    return hi.scatter_reduce(0, index, values, "amax"), lo.scatter_reduce(0, index, values, "amin")


def score_check(
    q: torch.Tensor,
    k: torch.Tensor,
    n: int,
    base: float = 10000.0,
    *,
    layout: str = "half_split",
    position_scale: float = 1.0,
    dtype: torch.dtype = torch.float64,
) -> ScoreCheck:
    """Rotate q and k (d,) to every position 0 .. n-1 in `dtype`, form all n x n scores, and measure how far they
    are from depending only on m - n (spread over each diagonal) and from the closed form."""
    device = q.device
    queries = apply_rope(q.to(dtype).expand(n, -1), base=base, layout=layout, position_scale=position_scale)
    keys = apply_rope(k.to(dtype).expand(n, -1), base=base, layout=layout, position_scale=position_scale)
    work = float64_capable(device)
    scores = portable.exact_matmul(queries.to(work), keys.to(work).T)
    offsets = torch.arange(-(n - 1), n, device=device)
    closed = relative_scores(q, k, offsets, base, layout=layout, position_scale=position_scale).to(work)
    hi, lo = diagonals(scores)
    e_hi, e_lo = diagonals(
        scores - closed[(torch.arange(n, device=device)[:, None] - torch.arange(n, device=device)[None, :]) + n - 1]
    )
    return ScoreCheck(scores, offsets, closed, hi - lo, torch.maximum(e_hi.abs(), e_lo.abs()))


def decay_bound(
    distances: torch.Tensor,
    d_head: int,
    base: float = 10000.0,
    *,
    position_scale: float = 1.0,
    chunk: int = 4096,
    theta: torch.Tensor | None = None,
) -> torch.Tensor:
    """RoFormer's relative upper bound (1/(d/2)) sum_{j=1}^{d/2} |S_j|, S_j = sum_{k<j} e^{i delta theta_k}, for
    each relative distance delta in `distances` (K,): float64 (K,). At delta = 0 it is (d/2 + 1) / 2. theta: (d/2,)
    float64 frequencies of a scaling (pipeline.core.rope_scaling) instead of base and position_scale.

    Computed on the CPU with numpy (its cumulative sums run in sequence, the same on every machine) and returned on
    distances' device."""
    import numpy as np

    if theta is None:
        theta = frequencies(d_head, base, position_scale)
    theta = theta.detach().cpu().to(torch.float64).numpy()
    flat = distances.detach().cpu().reshape(-1).to(torch.float64).numpy()
    out = np.empty(flat.size)
    for s in range(0, flat.size, chunk):
        sin, cos = portable.sin_cos(flat[s : s + chunk, None] * theta[None, :])  # (c, d/2)
        re, im = np.cumsum(cos, axis=-1), np.cumsum(sin, axis=-1)  # S_1 .. S_{d/2}
        out[s : s + chunk] = np.sqrt(re * re + im * im).mean(axis=-1)
    return torch.from_numpy(out).reshape(distances.shape).to(distances.device)


def decay_at_rest(d_head: int) -> float:
    """The bound at delta = 0: every S_j = j, so the mean of 1 .. d/2 = (d/2 + 1) / 2."""
    return (check_head_dim(d_head) // 2 + 1) / 2


def lowest_wavelength(d_head: int, base: float, position_scale: float = 1.0) -> float:
    """2 pi / theta_{d/2 - 1}: the period, in positions, of the slowest rotating pair."""
    return 2 * math.pi * position_scale * portable.cr_pow(float(base), (d_head - 2) / d_head)
