"""The sweep's batched PCA in numpy, oriented as scikit-learn orients it, and the disparity between projections.

`weighted_pca`: W1 E + W2 P for every weight pair and every sentence of one length, from three n x n Gram matrices
per sentence (exact products, pipeline.core.portable.exact_matmul) and one stacked eigh (pipeline.core.eigen, matrix
by matrix): a pair's result has the same bits alone or in a batch, and on every machine.
"""

from __future__ import annotations

import numpy as np

from pipeline.core.eigen import eigh
from pipeline.core.portable import exact_matmul


def weighted_pca(embeddings, encodings, w1, w2, n_components: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """PCA of X[s, j] = w1[j] * embeddings[s] + w2[j] * encodings[s] for every sentence s and weight pair j,
    as `sklearn.decomposition.PCA(n_components).fit_transform(X[s, j])`, signs included.

    embeddings, encodings: (S, n, d) for S sentences of n words, or (n, d) for one sentence. w1, w2: (P,)
    sequences or arrays. Returns coords (S, P, n, k) and explained_variance_ratio (S, P, k), float64; for (n, d)
    inputs the S axis is dropped.

    No X is formed: its centred Gram matrix is w1^2 Gee + w1 w2 (Gep + Gep^T) + w2^2 Gpp, so three n x n
    products per sentence and one stacked eigh of (S, P, n, n) give every projection: coords = U sqrt(lambda). Memory:
    about 16 S P n^2 bytes (the Gram matrices and their eigenvectors).
    Signs follow scikit-learn (>= 1.5, svd_flip on the components): the entry of largest magnitude of each
    component V_c = X^T U_c / s_c is made positive (_signs). Every step works on each (sentence, pair) on its own
    (elementwise products, one matrix product or eigh per matrix; a plain product decides only what any rounding of
    it would), so a pair's numbers do not depend on the batch around it.
    """
    e, p = np.asarray(embeddings, dtype=np.float64), np.asarray(encodings, dtype=np.float64)
    single = e.ndim == 2
    e, p = (e[None], p[None]) if single else (e, p)
    if e.ndim != 3 or e.shape != p.shape:
        raise ValueError(
            f"embeddings {np.shape(embeddings)} and encodings {np.shape(encodings)} must both be "
            "(sentences, n, d) or (n, d) of the same shape"
        )
    w1, w2 = np.asarray(w1, dtype=np.float64).reshape(-1), np.asarray(w2, dtype=np.float64).reshape(-1)
    if w1.shape != w2.shape:
        raise ValueError(f"w1 ({w1.size}) and w2 ({w2.size}) must have one value per weight pair")
    S, n, d = e.shape
    k = n_components
    if not 1 <= k <= min(n, d):
        raise ValueError(f"n_components={k} needs at least {k} samples and features, got n={n} and d={d}")

    e_c = e - e.mean(axis=1, keepdims=True)
    p_c = p - p.mean(axis=1, keepdims=True)
    g_ee, g_pp = exact_matmul(e_c, e_c.swapaxes(1, 2)), exact_matmul(p_c, p_c.swapaxes(1, 2))
    g_ep = exact_matmul(e_c, p_c.swapaxes(1, 2))
    g_mixed = g_ep + g_ep.swapaxes(1, 2)
    a, b, c = (w1 * w1)[:, None, None], (w1 * w2)[:, None, None], (w2 * w2)[:, None, None]  # (P, 1, 1)
    gram = a * g_ee[:, None] + b * g_mixed[:, None] + c * g_pp[:, None]  # (S, P, n, n): every pair's Gram
    trace = lambda g: np.trace(g, axis1=-2, axis2=-1)[:, None]  # noqa: E731  (S, 1)
    total = a[:, 0, 0] * trace(g_ee) + b[:, 0, 0] * trace(g_mixed) + c[:, 0, 0] * trace(g_pp)  # (n-1) variance
    evals, evecs = eigh(gram)  # ascending
    lam = np.maximum(evals[..., ::-1][..., :k], 0.0)  # (S, P, k), descending
    u = evecs[..., ::-1][..., :k]  # (S, P, n, k)

    sign = _signs(e_c, p_c, w1, w2, u)
    coords = u * (np.sqrt(lam) * sign)[..., None, :]
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.where(total[..., None] > 0, lam / total[..., None], 0.0)
    return (coords[0], ratio[0]) if single else (coords, ratio)


def _signs(e_c: np.ndarray, p_c: np.ndarray, w1: np.ndarray, w2: np.ndarray, u: np.ndarray) -> np.ndarray:
    """(S, P, k) the sign of the entry of largest magnitude of each component V_c = X^T U_c / s_c (u: (S, P, n, k)),
    from one plain float64 product where no other entry comes within twice a margin and the entry is beyond it, else
    from V_c computed exactly as w1 (E^T U_c) + w2 (P^T U_c). The margin, n 2^-44 of the terms' size, is 256 times
    the rounding of a sum of 2n products, far above the exact path's: both pick that entry and sign (the exact path
    alone, or products on OpenBLAS's threads, cost more: docs/benchmarks-measurements.md#the-numerical-core)."""
    (S, n, d), shape = e_c.shape, u.shape[:2] + u.shape[-1:]
    features = np.concatenate([e_c, p_c], axis=1)  # (S, 2n, d)
    u_t = np.ascontiguousarray(u.swapaxes(2, 3))  # (S, P, k, n)
    weighted = np.concatenate([w1[:, None, None] * u_t, w2[:, None, None] * u_t], axis=3).reshape(S, -1, 2 * n)
    size = np.abs(w1) * np.abs(e_c).max(axis=(1, 2))[:, None] + np.abs(w2) * np.abs(p_c).max(axis=(1, 2))[:, None]
    margin = (n * 2.0**-44 * np.abs(u_t).sum(axis=3) * size[..., None]).reshape(S, -1)  # (S, P k)
    pivot, runner_up = np.empty_like(margin), np.empty_like(margin)
    rows = max(1, 2**19 // (d * 2 * n))  # components at a time: each product under OpenBLAS's size for threads
    for at in (slice(r, r + rows) for r in range(0, weighted.shape[1], rows)):
        magnitude = np.abs(v := np.matmul(weighted[:, at], features))  # (S, rows, d): |V_c s_c|
        pivot[:, at] = np.take_along_axis(v, top := magnitude.argmax(axis=-1)[..., None], axis=-1)[..., 0]
        np.put_along_axis(magnitude, top, -np.inf, axis=-1)
        runner_up[:, at] = magnitude.max(axis=-1)  # the largest magnitude after the pivot's
    sign = np.where(pivot < 0, -1.0, 1.0).reshape(shape)
    s, j = np.nonzero(((runner_up >= np.abs(pivot) - 2 * margin) | (np.abs(pivot) <= margin)).reshape(shape).any(-1))
    if len(s):  # exact products (exact_matmul) for those pairs
        uj, e_t, p_t = u[s, j], e_c.swapaxes(1, 2)[s], p_c.swapaxes(1, 2)[s]
        v = w1[j, None, None] * exact_matmul(e_t, uj) + w2[j, None, None] * exact_matmul(p_t, uj)  # (m, d, k)
        pivot = np.take_along_axis(v, np.abs(v).argmax(axis=-2)[..., None, :], axis=-2)[..., 0, :]
        sign[s, j] = np.where(pivot < 0, -1.0, 1.0)
    return sign
