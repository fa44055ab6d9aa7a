"""The literature's property scores of a position encoding, one definition for every family (numpy float64).

Every family is scored on its position-position proximity P (N x N, query position i in rows, key position j in
columns; pipeline.core.families says what P is for each family) and on its attention prior A (N x N,
row-stochastic). Non-finite entries of P (-inf: masked by a causal mask) are left out of Wang et al.'s scores.

Wang et al., "On Position Embeddings in BERT" (ICLR 2021), on P:
    monotonicity           mean over rows i and sides (j > i, j < i) with >= 2 distinct finite values of the Spearman
                           rank correlation of P[i, j] with -|i - j|: 1 = P falls strictly with the distance;
                           None where no row side varies (a constant P)
    translation invariance the share of P's variance explained by the offset i - j (correlation ratio eta^2:
                           1 - within-diagonal variance / total variance): 1 = P depends on i - j only (Toeplitz);
                           None for a constant P (no variance to explain)
    symmetry               ||S||^2 / (||S||^2 + ||K||^2) of the centred P = S + K (symmetric + antisymmetric
                           parts), over pairs with both P[i, j] and P[j, i] finite: 1 = symmetric, 0 = antisymmetric;
                           None where no such pair off the diagonal exists (a causal mask) or P is constant
Chen et al., "The Locality and Symmetry of Positional Encodings" (2023), on A, as the authors' calculate.py
(tigerchen52/locality_symmetry) computes them:
    locality               mean over rows i of sum_j A[i, j] 2^-|i - j|: 1 = all weight on the diagonal
    symmetry               1 - the mean over rows i and offsets k = 1 .. min(i, N - 1 - i) of |A[i, i-k] - A[i, i+k]|,
                           each row's differences min-max scaled by scikit-learn's MinMaxScaler rule: a row whose
                           range is below 10 machine epsilons (2.2e-15) counts as constant and is only shifted to
                           start at 0; any other row is stretched to [0, 1]. So the score says how many of a row's
                           offsets are asymmetric relative to that row's worst one, not how asymmetric it is: an
                           antisymmetric perturbation of a symmetric prior moves it from 1 to the same value whether
                           it is 1e-9 or 1e-2 in size (tests/test_pe_properties.py).
"""

from __future__ import annotations

import math

import numpy as np

PROPERTIES = ("wang_monotonicity", "wang_translation_invariance", "wang_symmetry", "chen_locality", "chen_symmetry")
# scikit-learn's MinMaxScaler (preprocessing._data._handle_zeros_in_scale): a range below 10 eps is a constant feature
CONSTANT_RANGE = 10 * np.finfo(np.float64).eps


def softmax_rows(logits: np.ndarray) -> np.ndarray:
    """(..., N, N) row-stochastic softmax of each row; -inf entries get weight 0 (portable.exp: the same bits
    everywhere)."""
    from pipeline.core.portable import exp

    shifted = logits - logits.max(axis=-1, keepdims=True)
    weights = exp(shifted)
    return weights / weights.sum(axis=-1, keepdims=True)


def _ranks(x: np.ndarray) -> np.ndarray:
    """(S, L) average ranks 0 .. L-1 of each row (ties share the mean of their ranks), as Spearman's correlation
    uses them; a stable sort, so ties never depend on the sorting kernel."""
    s, n = x.shape
    order = np.argsort(x, axis=1, kind="stable")
    ordered = np.take_along_axis(x, order, axis=1)
    position = np.broadcast_to(np.arange(n), (s, n))
    starts = np.ones((s, n), dtype=bool)
    starts[:, 1:] = ordered[:, 1:] != ordered[:, :-1]
    ends = np.ones((s, n), dtype=bool)
    ends[:, :-1] = starts[:, 1:]
    first = np.maximum.accumulate(np.where(starts, position, 0), axis=1)
    last = np.minimum.accumulate(np.where(ends, position, n - 1)[:, ::-1], axis=1)[:, ::-1]
    ranks = np.empty((s, n))
    np.put_along_axis(ranks, order, (first + last) / 2.0, axis=1)
    return ranks


def spearman(x: np.ndarray, y: np.ndarray) -> float | None:
    """Spearman's rank correlation of x and y (both (L,)); None if either is constant."""
    rx, ry = _ranks(np.asarray(x, dtype=np.float64)[None])[0], _ranks(np.asarray(y, dtype=np.float64)[None])[0]
    rx, ry = rx - rx.mean(), ry - ry.mean()
    norm = math.sqrt(float((rx * rx).sum() * (ry * ry).sum()))
    return float((rx * ry).sum()) / norm if norm > 0 else None


def _segment_correlations(segments: np.ndarray) -> np.ndarray:
    """(S,) Spearman(segment, -distance) of each row of segments (S, L), a row ordered by increasing distance from
    its query; nan for a row without variance."""
    length = segments.shape[1]
    rx = _ranks(segments)
    rx = rx - rx.mean(axis=1, keepdims=True)
    ry = (length - 1) / 2.0 - np.arange(length, dtype=np.float64)  # the ranks of -distance 1 .. L, centred
    norm = np.sqrt((rx * rx).sum(axis=1) * float((ry * ry).sum()))
    rho = (rx * ry).sum(axis=1)
    return np.where(norm > 0, rho / np.where(norm > 0, norm, 1.0), np.nan)


def wang_monotonicity_many(ps: np.ndarray) -> list[float | None]:
    """wang_monotonicity of each of ps (S, N, N), the row sides of one length ranked together (vectorised)."""
    ps = np.asarray(ps, dtype=np.float64)
    count, n = ps.shape[0], ps.shape[1]
    values: list[list[float]] = [[] for _ in range(count)]
    for length in range(2, n):
        # the side j > i of row n-1-length and the side j < i of row `length`, each ordered by distance 1 .. length
        for sides in (ps[:, n - 1 - length, n - length :], ps[:, length, length - 1 :: -1]):
            finite = np.isfinite(sides)
            whole = np.flatnonzero(finite.all(axis=1))
            for r, rho in zip(whole, _segment_correlations(sides[whole])):
                if not np.isnan(rho):
                    values[r].append(float(rho))
            for r in np.flatnonzero(~finite.all(axis=1) & (finite.sum(axis=1) >= 2)):  # partly masked sides
                keep = finite[r]
                rho = spearman(sides[r, keep], -np.arange(1, length + 1, dtype=np.float64)[keep])
                if rho is not None:
                    values[r].append(rho)
    return [float(np.mean(v)) if v else None for v in values]


def wang_monotonicity(p: np.ndarray) -> float | None:
    return wang_monotonicity_many(np.asarray(p)[None])[0]


def wang_translation_invariance(p: np.ndarray) -> float | None:
    n = p.shape[0]
    offset = (np.arange(n)[:, None] - np.arange(n)[None, :]).ravel() + n - 1
    values = p.ravel()
    keep = np.isfinite(values)
    offset, values = offset[keep], values[keep]
    centred = values - values.mean()
    total = float((centred * centred).sum())
    if total == 0:
        return None
    counts = np.bincount(offset, minlength=2 * n - 1)
    # Each diagonal is shifted by one of its own values before its mean is taken, so that a constant diagonal has a
    # residual of exactly 0: its unshifted mean is off by rounding (~ n eps |value|), which on a nearly constant matrix
    # is not small beside the total variance.
    diagonals, first = np.unique(offset, return_index=True)
    shift = np.zeros(2 * n - 1)
    shift[diagonals] = values[first]
    shifted = values - shift[offset]
    means = np.bincount(offset, weights=shifted, minlength=2 * n - 1) / np.maximum(counts, 1)
    residual = shifted - means[offset]
    within = float((residual * residual).sum())
    return 1.0 - within / total


def wang_symmetry(p: np.ndarray) -> float | None:
    both = np.isfinite(p) & np.isfinite(p.T)
    if not (both & ~np.eye(p.shape[0], dtype=bool)).any():
        return None
    centred = np.where(both, p - p[both].mean(), 0.0)
    sym, anti = (centred + centred.T) / 2, (centred - centred.T) / 2
    s, k = float((sym * sym).sum()), float((anti * anti).sum())
    return s / (s + k) if s + k > 0 else None


def chen_locality(a: np.ndarray) -> float:
    n = a.shape[0]
    factor = np.ldexp(1.0, -np.abs(np.arange(n)[:, None] - np.arange(n)[None, :]))  # 2^-|i-j|, exact
    return float((a * factor).sum(axis=1).mean())


def min_max_scaled(values: np.ndarray) -> np.ndarray:
    """(L,) values scaled to [0, 1] as scikit-learn's MinMaxScaler().fit_transform does to one feature: scale
    1 / range (1 where the range is below CONSTANT_RANGE), then values * scale + (0 - min * scale)."""
    low = values.min()
    spread = values.max() - low
    scale = 1.0 / (spread if spread >= CONSTANT_RANGE else 1.0)
    return values * scale + (0.0 - low * scale)


def chen_symmetry(a: np.ndarray) -> float:
    n = a.shape[0]
    scaled = []
    for i in range(n):
        m = min(i, n - 1 - i)
        if m == 0:
            continue
        k = np.arange(1, m + 1)
        scaled.append(min_max_scaled(np.abs(a[i, i - k] - a[i, i + k])))
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


def toeplitz(profile: np.ndarray, n: int) -> np.ndarray:
    """(n, n) P[i, j] = profile[i - j + n - 1] from a profile over offsets -(n-1) .. n-1."""
    index = np.arange(n)[:, None] - np.arange(n)[None, :] + n - 1
    return profile[index]
