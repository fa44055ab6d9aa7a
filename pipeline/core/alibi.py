"""ALiBi (Press et al., "Train Short, Test Long"): attention with linear biases, in torch.

No position is added to the embedding and nothing is rotated: head h adds -m_h (i - j) to the score of query i
and key j <= i (causal), a penalty linear in the distance with a fixed slope per head.

Slopes (the paper, section 3, and the official `get_slopes`): for n heads, n a power of two, the geometric
sequence starting at 2^(-8/n) with ratio 2^(-8/n): m_h = 2^(-8 (h + 1) / n), h = 0 .. n-1 (8 heads: 1/2, 1/4,
..., 1/256). Otherwise, with p the largest power of two below n: the p slopes of p heads, then every other
slope of the 2p sequence (its 1st, 3rd, ...) for the n - p remaining heads. Exponents are exact fractions;
each slope is 2 to that exponent, correctly rounded (pipeline.core.portable.cr_pow: the same bits on every machine).

The bias is Toeplitz in (i, j) (it depends only on i - j). The official implementation adds m_h j to row i
instead of -m_h (i - j): the two differ by m_h i, a constant per row, which the softmax over j cancels.
"""

from __future__ import annotations

from fractions import Fraction

import torch


def _power_of_two_exponents(n: int) -> list[Fraction]:
    return [Fraction(-8 * (h + 1), n) for h in range(n)]


def slope_exponents(heads: int) -> list[Fraction]:
    """(heads,) exponents e_h with slope m_h = 2^(e_h), exact (see the module doc)."""
    if heads < 1:
        raise ValueError(f"the number of heads ({heads}) must be >= 1")
    p = 1 << (heads.bit_length() - 1)  # the largest power of two <= heads
    if p == heads:
        return _power_of_two_exponents(heads)
    return _power_of_two_exponents(p) + _power_of_two_exponents(2 * p)[0::2][: heads - p]


def slopes(heads: int, device: torch.device | str | None = None, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """(heads,) ALiBi slopes m_h, computed in float64 and rounded once to `dtype`."""
    from pipeline.core.portable import cr_pow

    values = torch.tensor([cr_pow(2.0, float(e)) for e in slope_exponents(heads)], dtype=torch.float64)
    return values.to(torch.device(device or "cpu"), dtype)


def bias(slope: torch.Tensor, length: int, *, causal: bool = True) -> torch.Tensor:
    """(heads, L, L) bias added to the scores of query i (rows) and key j (columns): -m_h (i - j) for j <= i and
    -inf for j > i (causal), or -m_h |i - j| for every j (bidirectional). float64 on slope's device."""
    if length < 1:
        raise ValueError(f"the sequence length ({length}) must be >= 1")
    positions = torch.arange(length, device=slope.device, dtype=torch.float64)
    distance = positions[:, None] - positions[None, :]  # (L, L) i - j
    out = -slope.to(torch.float64)[:, None, None] * (distance if causal else distance.abs())[None]
    if causal:
        out.masked_fill_((distance < 0)[None], -torch.inf)
    return out.add_(0.0)  # -0.0 on the diagonal -> 0.0


def penalty(slope: torch.Tensor, distances: torch.Tensor) -> torch.Tensor:
    """(heads, K) score penalty -m_h k for each distance k in `distances` (K,), float64."""
    return -slope.to(torch.float64)[:, None] * distances.to(slope.device, torch.float64)[None, :]


def half_weight_distance(slope: torch.Tensor) -> torch.Tensor:
    """(heads,) distance ln(2) / m_h at which the bias halves a key's softmax weight (equal content scores)."""
    from pipeline.core.portable import cr_log

    return cr_log(2.0) / slope.to(torch.float64)


def toeplitz_deviation(matrix: torch.Tensor) -> float:
    """max over the diagonals of (..., L, L) of |entry - the diagonal's first entry|: 0 exactly when every entry is a
    function of i - j. Masked (-inf) entries must fill whole diagonals; a diagonal mixing them with finite ones
    gives inf."""
    L = matrix.shape[-1]
    worst = 0.0
    for offset in range(-(L - 1), L):
        diagonal = torch.diagonal(matrix, offset=offset, dim1=-2, dim2=-1)
        first = diagonal[..., :1]
        same = diagonal == first  # -inf == -inf holds
        gap = torch.where(same, torch.zeros_like(diagonal), (diagonal - first).abs())
        worst = max(worst, float(torch.where(gap.isnan(), torch.inf, gap).max()))
    return worst
