"""The literature's property scores of a position encoding, one definition for every family (numpy float64).

Every family is scored on its position-position proximity P (N x N, query position i in rows, key position j in
columns): the PE dot product PE(i) . PE(j) of an additive encoding (sinusoidal, learned), RoPE's expected score
a^2 E[q . R(i - j) q] over seeded Gaussian q (pipeline.core.relative.rope_proximity), ALiBi's bias (-inf where
masked), NoPE's constant 0. Its attention prior A = softmax over each row of P / sqrt(d) (ALiBi: of the bias
itself, which is added to q . k / sqrt(d)) is row-stochastic.

Wang et al., "On Position Embeddings in BERT" (ICLR 2021), on P (finite entries only):
    monotonicity           mean over rows i and sides (j > i, j < i) with >= 2 distinct values of the Spearman
                           rank correlation of P[i, j] with -|i - j|: 1 = P falls strictly with the distance;
                           None where no row side varies (NoPE)
    translation invariance the share of P's variance explained by the offset i - j (correlation ratio eta^2:
                           1 - within-diagonal variance / total variance): 1 = P depends on i - j only (Toeplitz);
                           1 for a constant P
    symmetry               ||S||^2 / (||S||^2 + ||K||^2) of the centred P = S + K (symmetric + antisymmetric
                           parts), over pairs with both P[i, j] and P[j, i] finite: 1 = symmetric, 0 = antisymmetric;
                           None where no such pair off the diagonal exists (a causal mask)
Chen et al., "The Locality and Symmetry of Positional Encodings" (2023), on A (the authors' calculate.py):
    locality               mean over rows i of sum_j A[i, j] 2^-|i - j|: 1 = all weight on the diagonal
    symmetry               1 - the mean over rows i and offsets k = 1 .. min(i, N - 1 - i) of |A[i, i-k] - A[i, i+k]|,
                           min-max scaled within each row (a row whose differences are all equal scores 0 there;
                           differences below 1e-12 of the row's largest weight, rounding, count as 0)
"""

from __future__ import annotations

import math

import numpy as np

ROUNDING = 1e-12  # Chen et al.'s symmetry: differences below this share of the row's largest weight count as 0
PROPERTIES = ("wang_monotonicity", "wang_translation_invariance", "wang_symmetry", "chen_locality", "chen_symmetry")


def softmax_rows(logits: np.ndarray) -> np.ndarray:
    """Row-stochastic softmax of each row; -inf entries get weight 0 (portable.exp: the same bits everywhere)."""
    from pipeline.core.portable import exp

    shifted = logits - logits.max(axis=1, keepdims=True)
    weights = exp(shifted)
    return weights / weights.sum(axis=1, keepdims=True)


def _ranks(x: np.ndarray) -> np.ndarray:
    """Average ranks (ties share the mean of their ranks), as Spearman's correlation uses them."""
    order = np.argsort(x, kind="stable")
    ranks = np.empty(len(x))
    ranks[order] = np.arange(len(x), dtype=np.float64)
    _, inverse, counts = np.unique(x, return_inverse=True, return_counts=True)
    sums = np.bincount(inverse, weights=ranks)
    return (sums / counts)[inverse]


def spearman(x: np.ndarray, y: np.ndarray) -> float | None:
    """Spearman's rank correlation of x and y; None if either is constant."""
    rx, ry = _ranks(x), _ranks(y)
    rx, ry = rx - rx.mean(), ry - ry.mean()
    norm = math.sqrt(float((rx * rx).sum() * (ry * ry).sum()))
    return float((rx * ry).sum()) / norm if norm > 0 else None


def wang_monotonicity(p: np.ndarray) -> float | None:
    n = p.shape[0]
    values = []
    for i in range(n):
        for side in (np.arange(i + 1, n), np.arange(i - 1, -1, -1)):
            row = p[i, side]
            keep = np.isfinite(row)
            if keep.sum() >= 2:
                rho = spearman(row[keep], -np.abs(side[keep] - i).astype(np.float64))
                if rho is not None:
                    values.append(rho)
    return float(np.mean(values)) if values else None


def wang_translation_invariance(p: np.ndarray) -> float:
    n = p.shape[0]
    offset = (np.arange(n)[:, None] - np.arange(n)[None, :]).ravel() + n - 1
    values = p.ravel()
    keep = np.isfinite(values)
    offset, values = offset[keep], values[keep]
    centred = values - values.mean()
    total = float((centred * centred).sum())
    if total == 0:
        return 1.0
    counts = np.bincount(offset, minlength=2 * n - 1)
    means = np.bincount(offset, weights=values, minlength=2 * n - 1) / np.maximum(counts, 1)
    residual = values - means[offset]
    within = float((residual * residual).sum())
    return 1.0 - within / total


def wang_symmetry(p: np.ndarray) -> float | None:
    both = np.isfinite(p) & np.isfinite(p.T)
    if not (both & ~np.eye(p.shape[0], dtype=bool)).any():
        return None
    centred = np.where(both, p - p[both].mean(), 0.0)
    sym, anti = (centred + centred.T) / 2, (centred - centred.T) / 2
    s, k = float((sym * sym).sum()), float((anti * anti).sum())
    return s / (s + k) if s + k > 0 else 1.0


def chen_locality(a: np.ndarray) -> float:
    n = a.shape[0]
    factor = np.ldexp(1.0, -np.abs(np.arange(n)[:, None] - np.arange(n)[None, :]))  # 2^-|i-j|, exact
    return float((a * factor).sum(axis=1).mean())


def chen_symmetry(a: np.ndarray) -> float:
    n = a.shape[0]
    scaled = []
    for i in range(n):
        m = min(i, n - 1 - i)
        if m == 0:
            continue
        k = np.arange(1, m + 1)
        diff = np.abs(a[i, i - k] - a[i, i + k])
        # rounding noise of an exactly symmetric row (1e-18) would be scaled up to 0..1 like a real difference
        diff[diff <= ROUNDING * np.abs(a[i]).max()] = 0.0
        span = diff.max() - diff.min()
        scaled.append((diff - diff.min()) / span if span > 0 else np.zeros(m))
    return 1.0 - float(np.concatenate(scaled).mean())


def scores(proximity: np.ndarray, attention: np.ndarray) -> dict[str, float | None]:
    """Every property of PROPERTIES: Wang et al.'s on the proximity, Chen et al.'s on the attention prior."""
    return {
        "wang_monotonicity": wang_monotonicity(proximity),
        "wang_translation_invariance": wang_translation_invariance(proximity),
        "wang_symmetry": wang_symmetry(proximity),
        "chen_locality": chen_locality(attention),
        "chen_symmetry": chen_symmetry(attention),
    }


def mean_scores(per_head: list[dict[str, float | None]]) -> dict[str, float | None]:
    """The mean over heads of each property (None where a head has none)."""
    out = {}
    for name in PROPERTIES:
        values = [s[name] for s in per_head]
        out[name] = None if any(v is None for v in values) else float(np.mean(values))
    return out


def toeplitz(profile: np.ndarray, n: int) -> np.ndarray:
    """(n, n) P[i, j] = profile[i - j + n - 1] from a profile over offsets -(n-1) .. n-1."""
    index = np.arange(n)[:, None] - np.arange(n)[None, :] + n - 1
    return profile[index]
