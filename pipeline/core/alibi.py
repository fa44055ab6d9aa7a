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

The attention prior of a head, the softmax over keys of its bias alone, has a closed form (numpy, `prior`): row i
is r^|i - j| / Z_i with r = e^(-m), Z_i a geometric sum; so does Chen et al.'s locality of it (`locality`).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
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


# ---------------------------------------------------------------- the attention prior in closed form (numpy)


def _powers(slope: float, exponents: np.ndarray) -> np.ndarray:
    """r^k = e^(-m k) for integers k >= 0, float64: m k rounded once, then portable.exp (the same bits everywhere)."""
    from pipeline.core.portable import exp

    return exp(-slope * exponents.astype("float64"))


def row_sums(ratio_powers, n: int, causal: bool):
    """(n,) sum over the keys j of row i of x^|i - j| (j <= i when causal), in closed form from x^k, k = 0 .. n
    (ratio_powers (n + 1,)): (1 - x^(i+1)) / (1 - x), plus (x - x^(n-i)) / (1 - x) for the keys after i."""
    x = ratio_powers[1]
    i = np.arange(n)
    before = (1.0 - ratio_powers[i + 1]) / (1.0 - x)
    return before if causal else before + (x - ratio_powers[n - i]) / (1.0 - x)


def prior(slope: float, n: int, *, causal: bool) -> np.ndarray:
    """(n, n) float64 attention prior of one head, the softmax over keys of its bias alone, in closed form:
    A[i, j] = r^|i - j| / Z_i with r = e^(-m) and Z_i = row_sums(...) (no sum over the row is formed); 0 for a
    masked key j > i when causal."""
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    weights = _powers(slope, np.abs(i - j)) / row_sums(_powers(slope, np.arange(n + 1)), n, causal)[:, None]
    return np.where(j > i, 0.0, weights) if causal else weights


def locality(slope: float, n: int, *, causal: bool) -> float:
    """Chen et al.'s locality of prior(slope, n) in closed form: mean over rows of sum_j (r/2)^|i-j| / Z_i, the
    geometric sums of ratio r/2 and r (r/2: e^(-m) halved exactly)."""
    k = np.arange(n + 1)
    halved = np.ldexp(_powers(slope, k), -k)  # (r / 2)^k = r^k 2^-k, exactly
    return float((row_sums(halved, n, causal) / row_sums(_powers(slope, k), n, causal)).mean())
