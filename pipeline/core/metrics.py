"""The notebook's visual claims as numbers, for one sentence's points Z (n words) against its pure
word embeddings E and pure positional encodings P.

Every metric is invariant to a global scale of Z, so for W1 > 0 it depends only on r = W2 / W1.

    knn_semantic        share of each word's k nearest neighbours in Z that are also its neighbours in E
                        (1: meaning neighbourhoods intact)
    knn_positional      the same against P (1: neighbourhoods are those of sentence position)
    trustworthiness     sklearn.manifold.trustworthiness(E, Z, k): 1 when Z invents no neighbour E lacks
    positional_rank_corr  Spearman correlation between pairwise distances in Z and |i - j| (1: distance
                        is sentence distance)
    group_distance_ratio  mean distance within the configured semantic groups / mean over all pairs
                        (< 1: groups such as king/queen stay together; >= 1: they are scattered)
    angular_order_2d    share of consecutive positions (i, i+1) whose angle around the centroid turns
                        the dominant way (1: the words fall in clockwise or anticlockwise order)
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

METRIC_DOCS = {
    "knn_semantic": "share of each word's k nearest neighbours that are also its neighbours in the pure word "
                    "embeddings (1 = meaning neighbourhoods intact)",
    "knn_positional": "share of each word's k nearest neighbours that are also its neighbours in the pure "
                      "positional encodings (1 = neighbourhoods are those of sentence position)",
    "trustworthiness": "sklearn trustworthiness against the pure word embeddings (1 = no neighbour that the "
                       "embeddings lack)",
    "positional_rank_corr": "Spearman correlation between pairwise distances and |i - j| (1 = distance is "
                            "sentence distance)",
    "group_distance_ratio": "mean distance within the semantic groups / mean distance over all pairs (< 1 = "
                            "groups such as king/queen stay together)",
    "angular_order_2d": "share of consecutive positions turning the same way around the centroid (1 = words "
                        "fall in clockwise order of position)",
    "pca_disparity": "Procrustes disparity between this projection and the pure-embedding projection (0 = same "
                     "picture up to rotation, scale and reflection; 1 = nothing left of it)",
    "explained_variance_2d": "share of the variance the 2-D PCA picture shows",
}


def pairwise_distances(z: np.ndarray) -> np.ndarray:
    """(n, n) Euclidean distances of the rows of z (n, dim), exact zero diagonal."""
    z = np.asarray(z, dtype=np.float64)
    diff = z[:, None, :] - z[None, :, :]
    return np.sqrt((diff * diff).sum(axis=-1))


def _quantized(dist: np.ndarray) -> np.ndarray:
    scale = float(np.max(dist)) or 1.0
    return np.round(dist / scale * 1e6)


def neighbours(dist: np.ndarray, k: int) -> np.ndarray:
    """(n, k) indices of each point's k nearest other points, ties broken by lower index.

    Distances are compared at 1e-6 of the largest: sinusoidal encodings tie exactly in theory (position i
    is as far from i-1 as from i+1), and float32 rounding must not decide between them.
    """
    masked = _quantized(dist) + np.diag(np.full(len(dist), np.inf))
    return np.argsort(masked, axis=1, kind="stable")[:, :k]


def knn_overlap(dist: np.ndarray, dist_reference: np.ndarray, k: int) -> float:
    """Mean over points of |N_k(dist) & R_k| / k, where R_k holds the k nearest points in the reference
    and every point tied with the k-th (positional encodings tie: i-1 and i+1 are equally far from i)."""
    ranked = _quantized(dist_reference) + np.diag(np.full(len(dist_reference), np.inf))
    kth = np.sort(ranked, axis=1)[:, k - 1: k]
    reference_sets = [set(np.nonzero(row <= bound)[0]) for row, bound in zip(ranked, kth[:, 0])]
    return float(np.mean([len(set(mine) & ref) / k for mine, ref in zip(neighbours(dist, k), reference_sets)]))


# trustworthiness and Spearman's rho are written out here (tests check them against scikit-learn
# and scipy): importing sklearn.manifold alone costs 0.8 s, more than the whole sweep stage's work.

def trustworthiness(reference: np.ndarray, z: np.ndarray, k: int) -> float:
    """sklearn.manifold.trustworthiness(reference, z, n_neighbors=k) (Euclidean), for k < n / 2.

    1 - 2 / (n k (2n - 3k - 1)) * sum over points i of sum over their k nearest neighbours j in z
    of max(0, rank of j among i's neighbours in the reference - k).
    """
    n = len(reference)
    dist_ref = pairwise_distances(reference)
    np.fill_diagonal(dist_ref, np.inf)
    rank = np.empty((n, n), dtype=np.int64)
    rank[np.arange(n)[:, None], np.argsort(dist_ref, axis=1)] = np.arange(1, n + 1)
    ranks = rank[np.arange(n)[:, None], neighbours(pairwise_distances(z), k)] - k
    penalty = ranks[ranks > 0].sum()
    return float(1.0 - penalty * (2.0 / (n * k * (2.0 * n - 3.0 * k - 1.0))))


def _average_ranks(values: np.ndarray) -> np.ndarray:
    """Ranks 1..n, ties sharing their average rank (scipy.stats.rankdata's 'average')."""
    order = np.argsort(values, kind="mergesort")
    sorted_values = values[order]
    starts = np.r_[True, sorted_values[1:] != sorted_values[:-1]]
    group = np.cumsum(starts) - 1                                  # tie group of each sorted entry
    bounds = np.r_[np.nonzero(starts)[0], len(values)]            # first index of each group, then n
    average = (bounds[:-1] + bounds[1:] + 1) / 2.0                 # mean of 1-based ranks in the group
    ranks = np.empty(len(values))
    ranks[order] = average[group]
    return ranks


def positional_rank_corr(dist: np.ndarray) -> float:
    """Spearman's rho between the pairwise distances (i < j) and |i - j|; nan for fewer than 3 points."""
    n = len(dist)
    if n < 3:
        return float("nan")
    i, j = np.triu_indices(n, k=1)
    a, b = _average_ranks(dist[i, j]), _average_ranks((j - i).astype(float))
    a, b = a - a.mean(), b - b.mean()
    denominator = np.sqrt((a * a).sum() * (b * b).sum())
    return float((a * b).sum() / denominator) if denominator > 0 else float("nan")


def group_distance_ratio(dist: np.ndarray, words: Sequence[str], groups: Sequence[Sequence[str]]) -> float:
    """Mean distance over word pairs inside a group / mean over all pairs; nan if no group has 2 words here."""
    n = len(dist)
    i, j = np.triu_indices(n, k=1)
    where = {}
    for index, word in enumerate(words):
        where.setdefault(word, []).append(index)
    inside = []
    for group in groups:
        members = sorted(index for word in group for index in where.get(word, []))
        inside += [dist[a, b] for x, a in enumerate(members) for b in members[x + 1:]]
    overall = dist[i, j].mean() if len(i) else 0.0
    if not inside or overall == 0:
        return float("nan")
    return float(np.mean(inside) / overall)


def angular_order(coords: np.ndarray) -> float:
    """Share of steps i -> i+1 that turn the dominant way around the centroid of (n, 2) coords."""
    centred = coords - coords.mean(axis=0)
    angles = np.arctan2(centred[:, 1], centred[:, 0])
    steps = np.angle(np.exp(1j * np.diff(angles)))     # wrapped to (-pi, pi]
    if len(steps) == 0:
        return float("nan")
    return float(max((steps > 0).mean(), (steps < 0).mean()))


def sentence_metrics(z: np.ndarray, coords: np.ndarray, e: np.ndarray, p: np.ndarray, words: Sequence[str],
                     groups: Sequence[Sequence[str]], k: int) -> dict[str, float]:
    """All metrics for one weighted sentence.

    z: (n, d) W1*E + W2*P; coords: (n, 2) its PCA projection; e, p: (n, d) pure embeddings and encodings.
    Keys '<metric>_hd' are computed in the d-dimensional space, '<metric>_2d' in the projection.
    """
    dist_e, dist_p = pairwise_distances(e), pairwise_distances(p)
    out: dict[str, float] = {}
    for space, points in (("hd", z), ("2d", coords)):
        dist = pairwise_distances(points)
        out[f"knn_semantic_{space}"] = knn_overlap(dist, dist_e, k)
        out[f"knn_positional_{space}"] = knn_overlap(dist, dist_p, k)
        out[f"trustworthiness_{space}"] = trustworthiness(e, points, k) if k < len(e) / 2 else float("nan")
        out[f"positional_rank_corr_{space}"] = positional_rank_corr(dist)
        out[f"group_distance_ratio_{space}"] = group_distance_ratio(dist, words, groups)
    out["angular_order_2d"] = angular_order(coords)
    return out


def crossover(ratios: np.ndarray, semantic: np.ndarray, positional: np.ndarray) -> float | None:
    """Smallest r (log-interpolated) at which `positional` first reaches `semantic`; None if it never does.

    ratios: (m,) increasing; semantic, positional: (m,) the two scores at those ratios.
    """
    gap = np.asarray(positional) - np.asarray(semantic)
    if gap[0] >= 0:
        return float(ratios[0])
    after = np.nonzero(gap >= 0)[0]
    if len(after) == 0:
        return None
    b = after[0]
    a = b - 1
    lo, hi = np.log10(ratios[a]), np.log10(ratios[b])
    t = -gap[a] / (gap[b] - gap[a])
    return float(10 ** (lo + t * (hi - lo)))


def valid_neighbours(k: int, n: int) -> int:
    """sklearn's trustworthiness needs k < n / 2: the configured k, lowered when a sentence is short."""
    return max(1, min(k, (n - 1) // 2))
