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
                        the dominant way (1: the words fall in clockwise or anticlockwise order); the turn's
                        direction is the sign of the cross product of the two centred points

Every function works on a batch: leading axes of B weightings of one sentence (B,), or of S sentences of the same
length (S, B) measured against their own references (`Reference` of S sentences: the sweep measures thousands of
sentences and weight pairs at once); one weighting of one sentence is that batch with B = 1. The batch axes never
change a value's bits: each pair's reductions run over the same contiguous axis, in the same order, as one pair of
one sentence alone.

The crossover (`crossover`, `switch_points`) is the exact ratio at which the k-NN curves switch, found by
bisection between the grid points that bracket a switch (pipeline.core.sweep evaluates the metrics there).

Every value has the same bits on every machine: elementwise IEEE arithmetic, numpy sums along an axis (pairwise, in
an order no CPU dispatch changes), stable sorts (ties keep their index order whatever sorting kernel the CPU gets),
and closed forms where a library would call LAPACK (the Procrustes disparity of 2-D points).
"""

from __future__ import annotations

from typing import Callable, Sequence

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
    """(..., n, n) Euclidean distances of the rows of z (..., n, dim), exact zero diagonal.

    Each distance is sqrt of the sum of squared differences over dim, summed as numpy sums one contiguous row, so a
    distance has the same bits whatever the batch around it; row i is computed once against the rows after it and
    mirrored ((a - b)^2 and (b - a)^2 are the same float): half the arithmetic of the full (n, n, dim) difference.
    """
    z = np.asarray(z, dtype=np.float64)
    n = z.shape[-2]
    out = np.zeros(z.shape[:-1] + (n,))
    for i in range(n - 1):
        diff = z[..., i + 1 :, :] - z[..., i : i + 1, :]
        row = np.sqrt((diff * diff).sum(axis=-1))  # (..., n - 1 - i)
        out[..., i, i + 1 :] = row
        out[..., i + 1 :, i] = row
    return out


def _quantized(dist: np.ndarray) -> np.ndarray:
    """(..., n, n) distances in units of 1e-6 of each matrix's largest, rounded."""
    scale = np.max(dist, axis=(-2, -1), keepdims=True)
    return np.round(dist / np.where(scale == 0, 1.0, scale) * 1e6)


def _off_diagonal(dist: np.ndarray) -> np.ndarray:
    return _quantized(dist) + np.diag(np.full(dist.shape[-1], np.inf))


def neighbours(dist: np.ndarray, k: int) -> np.ndarray:
    """(..., n, k) indices of each point's k nearest other points, ties broken by lower index; dist (..., n, n).

    Distances are compared at 1e-6 of the largest: sinusoidal encodings tie exactly in theory (position i
    is as far from i-1 as from i+1), and float32 rounding must not decide between them.
    """
    return np.argsort(_off_diagonal(dist), axis=-1, kind="stable")[..., :k]


def reference_sets(dist_reference: np.ndarray, k: int) -> np.ndarray:
    """(..., n, n) bool: row i marks i's k nearest points in the reference and every point tied with the k-th
    (positional encodings tie: i-1 and i+1 are equally far from i); dist_reference (..., n, n)."""
    ranked = _off_diagonal(dist_reference)
    kth = np.sort(ranked, axis=-1)[..., k - 1 : k]
    return ranked <= kth


def knn_overlaps(dist: np.ndarray, reference: np.ndarray, k: int) -> np.ndarray:
    """(...,) mean over points of |N_k(dist) & R_k| / k; dist (..., n, n), reference (n, n) from reference_sets, or
    one per batch entry (..., n, n) (several sentences of one length at once)."""
    mine = neighbours(dist, k)  # (..., n, k)
    sets = np.broadcast_to(reference, mine.shape[:-1] + reference.shape[-1:])
    shared = np.take_along_axis(sets, mine, axis=-1).sum(axis=-1)  # (..., n)
    return (shared / k).mean(axis=-1)


# trustworthiness and Spearman's rho are written out here (tests check them against scikit-learn
# and scipy): importing sklearn.manifold alone costs more than the whole sweep stage's work
# (docs/benchmarks-measurements.md#imports-avoided).


def reference_ranks(reference: np.ndarray) -> np.ndarray:
    """(..., n, n) int: rank[..., i, j] = 1-based rank of j among i's neighbours in the reference points
    (..., n, dim)."""
    n = reference.shape[-2]
    dist_ref = pairwise_distances(reference) + np.diag(np.full(n, np.inf))
    rank = np.empty(dist_ref.shape, dtype=np.int64)
    order = np.argsort(dist_ref, axis=-1, kind="stable")  # ties (repeated words) by index, as scikit-learn's
    np.put_along_axis(rank, order, np.broadcast_to(np.arange(1, n + 1), order.shape), axis=-1)
    return rank


def trustworthiness_batch(rank: np.ndarray, dist: np.ndarray, k: int) -> np.ndarray:
    """(...,) trustworthiness of embeddings given by their distances dist (..., n, n), against the reference
    ranks rank (n, n) of reference_ranks, or one per batch entry (broadcastable). Needs k < n / 2.

    sklearn.manifold.trustworthiness(reference, z, n_neighbors=k) (Euclidean): 1 - 2 / (n k (2n - 3k - 1)) * sum
    over points i of sum over their k nearest neighbours j in z of max(0, rank of j among i's neighbours in the
    reference - k)."""
    n = rank.shape[-1]
    mine = neighbours(dist, k)  # (..., n, k)
    ranks = np.take_along_axis(np.broadcast_to(rank, mine.shape[:-1] + (n,)), mine, axis=-1) - k
    penalty = np.where(ranks > 0, ranks, 0).sum(axis=(-2, -1))
    return 1.0 - penalty * (2.0 / (n * k * (2.0 * n - 3.0 * k - 1.0)))


def _average_ranks(values: np.ndarray) -> np.ndarray:
    """(..., m) ranks 1..m along the last axis, ties sharing their average rank (scipy.stats.rankdata's
    'average')."""
    m = values.shape[-1]
    order = np.argsort(values, axis=-1, kind="mergesort")
    sorted_values = np.take_along_axis(values, order, axis=-1)
    index = np.broadcast_to(np.arange(m), values.shape)
    new = np.ones(values.shape, dtype=bool)
    new[..., 1:] = sorted_values[..., 1:] != sorted_values[..., :-1]  # first entry of a tie group
    last = np.ones(values.shape, dtype=bool)
    last[..., :-1] = new[..., 1:]  # last entry of a tie group
    first_index = np.maximum.accumulate(np.where(new, index, 0), axis=-1)
    last_index = np.flip(np.minimum.accumulate(np.flip(np.where(last, index, m), axis=-1), axis=-1), axis=-1)
    ranks = np.empty(values.shape)
    np.put_along_axis(ranks, order, (first_index + last_index + 2) / 2.0, axis=-1)  # mean of 1-based ranks
    return ranks


def positional_rank_corrs(dist: np.ndarray) -> np.ndarray:
    """(...,) Spearman's rho between the pairwise distances (i < j) of dist (..., n, n) and |i - j|; nan for
    fewer than 3 points."""
    n = dist.shape[-1]
    if n < 3:
        return np.full(dist.shape[:-2], np.nan)
    i, j = np.triu_indices(n, k=1)
    a, b = _average_ranks(np.ascontiguousarray(dist[..., i, j])), _average_ranks((j - i).astype(float))
    a, b = a - a.mean(axis=-1, keepdims=True), b - b.mean()
    denominator = np.sqrt((a * a).sum(axis=-1) * (b * b).sum())
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denominator > 0, (a * b).sum(axis=-1) / denominator, np.nan)


def group_pairs(words: Sequence[str], groups: Sequence[Sequence[str]]) -> tuple[np.ndarray, np.ndarray]:
    """Index pairs (a, b), a < b, of the words that share a semantic group, group by group."""
    where: dict[str, list[int]] = {}
    for index, word in enumerate(words):
        where.setdefault(word, []).append(index)
    a_list, b_list = [], []
    for group in groups:
        members = sorted(index for word in group for index in where.get(word, []))
        for x, a in enumerate(members):
            a_list += [a] * (len(members) - x - 1)
            b_list += members[x + 1 :]
    return np.array(a_list, dtype=np.int64), np.array(b_list, dtype=np.int64)


def sentences_group_ratios(dist: np.ndarray, pairs: Sequence[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    """(S, B) mean distance over word pairs inside a group / mean over all pairs (nan if no group has 2 words there)
    of S sentences of n words, dist (S, B, n, n), pairs[s] the group_pairs of sentence s; the sentences that share
    their grouped pairs are measured together."""
    n = dist.shape[-1]
    out = np.full(dist.shape[:-2], np.nan)
    i, j = np.triu_indices(n, k=1)
    together: dict[bytes, tuple[np.ndarray, np.ndarray, list[int]]] = {}
    for s, (a, b) in enumerate(pairs):
        if len(a) and len(i):
            together.setdefault(a.tobytes() + b"|" + b.tobytes(), (a, b, []))[2].append(s)
    for a, b, rows in together.values():
        some = dist[rows]
        # contiguous rows: numpy sums a strided (fancy-indexed) axis in another order, and the bits would depend on B
        overall = np.ascontiguousarray(some[..., i, j]).mean(axis=-1)
        inside = np.ascontiguousarray(some[..., a, b]).mean(axis=-1)
        with np.errstate(invalid="ignore", divide="ignore"):
            out[rows] = np.where(overall == 0, np.nan, inside / overall)
    return out


def angular_orders(coords: np.ndarray) -> np.ndarray:
    """(...,) share of steps i -> i+1 that turn the dominant way around the centroid of coords (..., n, 2).

    A step turns anticlockwise when the cross product x_i y_(i+1) - y_i x_(i+1) of the centred points is > 0 (the
    sign of the sine of the angle between them), clockwise when < 0; a step along a line through the centroid (no
    turn or half a turn) or from the centroid itself counts for neither way."""
    if coords.shape[-2] < 2:
        return np.full(coords.shape[:-2], np.nan)
    centred = coords - coords.mean(axis=-2, keepdims=True)
    x, y = centred[..., 0], centred[..., 1]
    cross = x[..., :-1] * y[..., 1:] - y[..., :-1] * x[..., 1:]
    return np.maximum((cross > 0).mean(axis=-1), (cross < 0).mean(axis=-1))


def procrustes_disparities(reference: np.ndarray, others: np.ndarray) -> np.ndarray:
    """(..., B) scipy.spatial.procrustes disparity of each of others (..., B, n, 2) against reference (..., n, 2)
    (one per sentence), batched; nan where either projection collapsed to one point.

    With both sets centred and scaled to unit norm, the best rotation (or reflection) and scale leave
    1 - (s1 + s2)^2, s the singular values of the 2 x 2 cross-product M = a^T b, and for a 2 x 2 matrix
    (s1 + s2)^2 = ||M||_F^2 + 2 |det M|: a closed form with no SVD (which would go through LAPACK), equal to scipy's
    within 1e-15."""
    reference, others = np.asarray(reference, dtype=np.float64), np.asarray(others, dtype=np.float64)
    a = (reference - reference.mean(axis=-2, keepdims=True))[..., None, :, :]  # (..., 1, n, 2)
    b = others - others.mean(axis=-2, keepdims=True)
    norm_a, norm_b = np.sqrt((a * a).sum(axis=(-2, -1))), np.sqrt((b * b).sum(axis=(-2, -1)))
    collapsed = ~(np.ptp(others, axis=-2).any(axis=-1)) | ~(np.ptp(reference, axis=-2).any(axis=-1))[..., None]
    safe = np.where(collapsed, 1.0, norm_b)
    a, b = a / np.where(norm_a == 0, 1.0, norm_a)[..., None, None], b / safe[..., None, None]
    m = [[(a[..., i] * b[..., j]).sum(axis=-1) for j in range(2)] for i in range(2)]  # M[i][j] = sum_p a_pi b_pj
    frobenius = (m[0][0] * m[0][0] + m[0][1] * m[0][1]) + (m[1][0] * m[1][0] + m[1][1] * m[1][1])
    determinant = m[0][0] * m[1][1] - m[0][1] * m[1][0]
    disparity = np.maximum(1.0 - (frobenius + 2.0 * np.abs(determinant)), 0.0)
    return np.where(collapsed, np.nan, disparity)


class Reference:
    """What every weighting of a sentence is measured against: e, p (n, d) its pure embeddings and encodings, words
    its n words; or of S sentences of n words at once: e, p (S, n, d), words one list per sentence. The metrics of
    S sentences take (S, B, ...) batches: B weightings of each."""

    def __init__(self, e: np.ndarray, p: np.ndarray, words: Sequence, groups: Sequence[Sequence[str]], k: int) -> None:
        self.e, self.p, self.groups, self.k = np.asarray(e), np.asarray(p), groups, k
        self.sentences = self.e.ndim == 3  # S sentences, or one
        self.words = [list(w) for w in words] if self.sentences else list(words)
        self.pairs = [group_pairs(w, groups) for w in (self.words if self.sentences else [self.words])]
        # (S, 1, n, n) for S sentences: broadcast against (S, B, n, n) batches; (n, n) for one
        lead = (slice(None), None) if self.sentences else ()
        self.semantic = reference_sets(pairwise_distances(self.e), k)[lead]
        self.positional = reference_sets(pairwise_distances(self.p), k)[lead]
        self.ranks = reference_ranks(self.e)[lead] if k < self.e.shape[-2] / 2 else None

    def group_ratios(self, dist: np.ndarray) -> np.ndarray:
        """The group distance ratios of distances dist (B, n, n), or (S, B, n, n) for S sentences."""
        if self.sentences:
            return sentences_group_ratios(dist, self.pairs)
        return sentences_group_ratios(dist[None], self.pairs)[0]


def knn_scores(dist: np.ndarray, ref: Reference) -> tuple[np.ndarray, np.ndarray]:
    """knn_semantic and knn_positional of distances dist (B, n, n), or (S, B, n, n) for a Reference of S sentences:
    each (B,) or (S, B)."""
    return knn_overlaps(dist, ref.semantic, ref.k), knn_overlaps(dist, ref.positional, ref.k)


def batch_metrics(z: np.ndarray, coords: np.ndarray, ref: Reference) -> dict[str, np.ndarray]:
    """All metrics for B weightings of one sentence: z (B, n, d) W1*E + W2*P; coords (B, n, 2) their PCA
    projections (for a Reference of S sentences: z (S, B, n, d), coords (S, B, n, 2)). Keys '<metric>_hd' are
    computed in the d-dimensional space, '<metric>_2d' in the projection; each value is (B,) (or (S, B))."""
    out: dict[str, np.ndarray] = {}
    batch = z.shape[:-2]
    for space, points in (("hd", z), ("2d", coords)):
        dist = pairwise_distances(points)
        out[f"knn_semantic_{space}"], out[f"knn_positional_{space}"] = knn_scores(dist, ref)
        out[f"trustworthiness_{space}"] = (
            trustworthiness_batch(ref.ranks, dist, ref.k) if ref.ranks is not None else np.full(batch, np.nan)
        )
        out[f"positional_rank_corr_{space}"] = positional_rank_corrs(dist)
        out[f"group_distance_ratio_{space}"] = ref.group_ratios(dist)
    out["angular_order_2d"] = angular_orders(coords)
    return out


def sentence_metrics(
    z: np.ndarray,
    coords: np.ndarray,
    e: np.ndarray,
    p: np.ndarray,
    words: Sequence[str],
    groups: Sequence[Sequence[str]],
    k: int,
) -> dict[str, float]:
    """All metrics for one weighted sentence (batch_metrics with B = 1).

    z: (n, d) W1*E + W2*P; coords: (n, 2) its PCA projection; e, p: (n, d) pure embeddings and encodings.
    """
    values = batch_metrics(
        np.asarray(z, dtype=np.float64)[None],
        np.asarray(coords, dtype=np.float64)[None],
        Reference(e, p, words, groups, k),
    )
    return {key: float(v[0]) for key, v in values.items()}


# ---------------------------------------------------------------- the crossover

RTOL = 1e-9  # relative width of the bracket the bisection leaves around each switch point


def positional_wins(semantic: np.ndarray, positional: np.ndarray) -> np.ndarray:
    """(m,) bool: positional neighbours at least as many as semantic ones (the state the crossover enters)."""
    return np.asarray(positional) >= np.asarray(semantic)


def bisect_switches(
    lo: np.ndarray, hi: np.ndarray, state: np.ndarray, wins: Callable[[np.ndarray, np.ndarray], np.ndarray], rtol: float
) -> np.ndarray:
    """The switch points of B step functions at once, bisection on log r (geometric midpoints): bracket b lies
    between lo[b] < hi[b], where wins(lo) != wins(hi) == state[b]. Each bracket narrows until hi / lo - 1 <= rtol
    (or the floats between lo and hi are exhausted), in lockstep with the others; wins(brackets (A,), r (A,)) says
    which of the brackets still narrowing win at their midpoints, (A,) bool. Returns hi (B,), per bracket the
    smallest ratio found at which its state holds (the switch lies in (hi / (1 + rtol), hi])."""
    lo, hi = np.array(lo, dtype=np.float64), np.array(hi, dtype=np.float64)
    going = hi / lo - 1 > rtol
    while going.any():
        at = np.nonzero(going)[0]
        mid = np.sqrt(lo[at] * hi[at])
        inside = (lo[at] < mid) & (mid < hi[at])  # else the floats between lo and hi are exhausted: stop there
        going[at[~inside]] = False
        at, mid = at[inside], mid[inside]
        same = np.asarray(wins(at, mid), dtype=bool) == state[at]
        hi[at[same]] = mid[same]
        lo[at[~same]] = mid[~same]
        going[at] = hi[at] / lo[at] - 1 > rtol
    return hi


def switch_points(
    ratios: np.ndarray, wins_on_grid: np.ndarray, wins: Callable[[float], bool], rtol: float = RTOL
) -> list[tuple[float, bool]]:
    """Every switch between "meaning wins" and "position wins" that the grid brackets, located by bisection.

    ratios: (m,) increasing grid; wins_on_grid: (m,) bool, positional_wins on the grid; wins(r): the same
    predicate evaluated at any ratio. Returns [(r, state after the switch)], in increasing r. Two switches
    between the same two grid points (a state held only inside one grid interval) are not seen.
    """
    left = np.nonzero(wins_on_grid[1:] != wins_on_grid[:-1])[0]
    state = np.asarray(wins_on_grid, dtype=bool)[left + 1]
    found = bisect_switches(
        ratios[left], ratios[left + 1], state, lambda _, r: np.array([wins(float(x)) for x in r], dtype=bool), rtol
    )
    return [(float(r), bool(s)) for r, s in zip(found, state)]


def crossover(ratios: np.ndarray, wins_on_grid: np.ndarray, switches: list[tuple[float, bool]]) -> float | None:
    """r*: the smallest ratio at which positional neighbours are at least as many as semantic ones; the grid's
    first ratio if they already are there, None if they never are on the grid. switches from switch_points."""
    if wins_on_grid[0]:
        return float(ratios[0])
    return next((r for r, state in switches if state), None)


def valid_neighbours(k: int, n: int) -> int:
    """sklearn's trustworthiness needs k < n / 2: the configured k, lowered when a sentence is short."""
    return max(1, min(k, (n - 1) // 2))
