"""The metrics that replace "look at the plot", on cases whose answer is known."""
from __future__ import annotations

import math

import numpy as np
import pytest

from pipeline.core import metrics as m
from pipeline.core.encoding import sinusoidal_encoding


def line(n: int) -> np.ndarray:
    return np.stack([np.arange(n, dtype=float), np.zeros(n)], axis=1)


def test_knn_overlap_identical_and_disjoint():
    x = np.random.default_rng(0).normal(size=(9, 4))
    d = m.pairwise_distances(x)
    assert m.knn_overlap(d, d, 3) == 1.0
    # two tight clusters {0,1,2} {3,4,5}: with k=2, neighbours stay inside each cluster
    clusters = np.array([[0, 0], [0, 0.1], [0.1, 0], [9, 9], [9, 9.1], [9.1, 9]], dtype=float)
    swapped = clusters[[3, 4, 5, 0, 1, 2]]        # same geometry, points relabelled across clusters
    # relabelled so that reference clusters are {0,2,4} {1,3,5}: shared neighbours 1,0,1,1,0,1 of k=2 each
    mixed = m.pairwise_distances(clusters[[0, 3, 1, 4, 2, 5]])
    assert m.knn_overlap(m.pairwise_distances(clusters), mixed, 2) == pytest.approx(4 / 12)
    assert m.knn_overlap(m.pairwise_distances(clusters), m.pairwise_distances(swapped), 2) == 1.0


def test_knn_overlap_counts_ties_in_the_reference():
    """On a line, point 2's 3 nearest are 1, 3 and one of {0, 4}: either choice is a full match."""
    d = m.pairwise_distances(line(5))
    tilted = m.pairwise_distances(line(5) + np.array([[0, 0], [0, 0], [0, 0], [0, 0], [0, 1e-3]]))
    assert m.knn_overlap(tilted, d, 3) == 1.0


def test_positional_neighbours_of_sinusoidal_pe_are_ties_resolved_robustly():
    """PE(i) is as far from PE(i-1) as from PE(i+1): float32 rounding must not turn that into a mismatch."""
    pe = sinusoidal_encoding(11, 50).double().numpy()
    noise = np.random.default_rng(1).normal(scale=1e-4, size=pe.shape)
    assert m.knn_overlap(m.pairwise_distances(100 * pe + noise), m.pairwise_distances(pe), 3) == 1.0


def test_trustworthiness_is_sklearns():
    from sklearn.manifold import trustworthiness

    rng = np.random.default_rng(2)
    x, y = rng.normal(size=(12, 6)), rng.normal(size=(12, 2))
    assert m.trustworthiness(x, y, 3) == pytest.approx(trustworthiness(x, y, n_neighbors=3))
    assert m.trustworthiness(x, x[:, :2] * 0 + x @ np.eye(6)[:, :2], 3) <= 1.0


def test_positional_rank_corr():
    assert m.positional_rank_corr(m.pairwise_distances(line(8))) == pytest.approx(1.0)
    shuffled = line(8)[[3, 7, 0, 5, 1, 6, 2, 4]]
    assert m.positional_rank_corr(m.pairwise_distances(shuffled)) < 0.5
    assert math.isnan(m.positional_rank_corr(m.pairwise_distances(line(2))))


def test_group_distance_ratio():
    words = ["king", "queen", "dog", "wolf"]
    together = np.array([[0, 0], [0, 1], [10, 0], [10, 1]], dtype=float)
    apart = together[[0, 2, 1, 3]]
    groups = [["king", "queen"], ["dog", "wolf"]]
    assert m.group_distance_ratio(m.pairwise_distances(together), words, groups) < 0.2
    assert m.group_distance_ratio(m.pairwise_distances(apart), words, groups) > 1.0
    assert math.isnan(m.group_distance_ratio(m.pairwise_distances(together), words, [["red", "green"]]))


def test_angular_order():
    angles = np.linspace(0, 1.5 * np.pi, 10)
    circle = np.stack([np.cos(angles), np.sin(angles)], axis=1)
    assert m.angular_order(circle) == 1.0
    assert m.angular_order(circle[::-1]) == 1.0               # clockwise counts too
    assert m.angular_order(circle[[0, 5, 1, 6, 2, 7, 3, 8, 4, 9]]) < 0.8


def test_crossover_interpolates_in_log_r():
    r = np.array([0.1, 1.0, 10.0])
    assert m.crossover(r, np.array([1.0, 0.8, 0.2]), np.array([0.0, 0.4, 0.9])) == pytest.approx(
        10 ** (0 + (0.4 / (0.4 + 0.7))), rel=1e-12)
    assert m.crossover(r, np.array([1.0, 1.0, 1.0]), np.array([0.0, 0.1, 0.2])) is None
    assert m.crossover(r, np.array([0.1, 0.1, 0.1]), np.array([0.5, 0.5, 0.5])) == 0.1


def test_valid_neighbours_keeps_sklearns_bound():
    for n in range(3, 30):
        k = m.valid_neighbours(5, n)
        assert 1 <= k <= 5 and k < n / 2


def test_sentence_metrics_at_the_extremes():
    """r -> 0: the picture is the embeddings' (semantic 1); r -> inf: it is the encodings' (positional 1)."""
    rng = np.random.default_rng(3)
    e = rng.normal(size=(11, 50))
    p = sinusoidal_encoding(11, 50).double().numpy()
    words = [f"w{i}" for i in range(11)]
    from sklearn.decomposition import PCA

    low = m.sentence_metrics(e + 1e-6 * p, PCA(2).fit_transform(e + 1e-6 * p), e, p, words, [["w0", "w1"]], 3)
    high = m.sentence_metrics(e + 1e6 * p, PCA(2).fit_transform(e + 1e6 * p), e, p, words, [["w0", "w1"]], 3)
    assert low["knn_semantic_hd"] == 1.0 and low["trustworthiness_hd"] == pytest.approx(1.0)
    assert high["knn_positional_hd"] == 1.0 and high["positional_rank_corr_hd"] > 0.9
    assert high["knn_semantic_hd"] < 0.7
    assert set(low) == {f"{k}_{s}" for k in ("knn_semantic", "knn_positional", "trustworthiness",
                                             "positional_rank_corr", "group_distance_ratio") for s in ("hd", "2d")} | {
        "angular_order_2d"}


@pytest.mark.parametrize("seed", range(6))
def test_trustworthiness_and_spearman_match_sklearn_and_scipy(seed):
    """The hand-written versions (kept for start-up speed) equal the libraries' on random data."""
    from scipy.stats import spearmanr
    from sklearn.manifold import trustworthiness

    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 30))
    x, y = rng.normal(size=(n, 7)), rng.normal(size=(n, 2))
    for k in range(1, (n - 1) // 2 + 1):
        assert m.trustworthiness(x, y, k) == pytest.approx(trustworthiness(x, y, n_neighbors=k), abs=1e-12)
    dist = m.pairwise_distances(y)
    i, j = np.triu_indices(n, k=1)
    assert m.positional_rank_corr(dist) == pytest.approx(spearmanr(dist[i, j], j - i).statistic, abs=1e-12)
    tied = np.round(dist, 0)                                  # many ties on both sides
    assert m.positional_rank_corr(tied) == pytest.approx(spearmanr(tied[i, j], j - i).statistic, abs=1e-12)
