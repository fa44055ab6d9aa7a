"""pipeline.core.projection against scikit-learn's PCA and scipy's procrustes.

Ours has the same bits on every machine; scikit-learn's and scipy's results move with the machine's BLAS and LAPACK
kernels. A principal component with a real variance moves by ~n eps ||G|| / gap times its scale, below 1e-11 for
every matrix here (their top eigenvalues are at least 1% of the largest apart), so 1e-9 on coordinates is a
hundredfold margin; a component at the Gram matrix's rounding noise is noise anywhere and is held to its noise
bound instead (noise_components). Explained variance ratios move by ~n eps."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.spatial import procrustes
from scipy.stats import ortho_group
from sklearn.decomposition import PCA

from pipeline.core.encoding import sinusoidal_encoding
from pipeline.core.metrics import procrustes_disparities
from pipeline.core.projection import weighted_pca


def procrustes_disparity(reference, other) -> float:
    """procrustes_disparities for one pair of (n_points, 2) projections."""
    return float(procrustes_disparities(np.asarray(reference)[None], np.asarray(other)[None, None])[0, 0])


def sklearn_pca(batch: np.ndarray, k: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's coordinates and explained variance ratios for every matrix of a batch (float64)."""
    coords, ratios = [], []
    for m in np.asarray(batch, dtype=np.float64):
        pca = PCA(n_components=k)
        coords.append(pca.fit_transform(m))
        ratios.append(pca.explained_variance_ratio_)
    return np.stack(coords), np.stack(ratios)


def pca(x: np.ndarray, k: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """PCA of every matrix of x (batch, n, d) by weighted_pca with W1 = 1, W2 = 0: (batch, n, k), (batch, k)."""
    coords, ratio = weighted_pca(x, np.zeros_like(x), [1.0], [0.0], n_components=k)
    return coords[:, 0], ratio[:, 0]


def noise_components(ref_coords: np.ndarray) -> np.ndarray:
    """(batch, k) bool: the components whose variance lies at the rounding noise of the Gram matrix.

    n centred points span at most n - 1 directions, so a rank-deficient batch element has components of zero
    variance in theory; computed, their eigenvalue is rounding noise, about n eps ||G|| (||G|| the largest eigenvalue),
    and their coordinates sqrt(lambda) are noise of up to sqrt(64 n eps ||G||) in any implementation and on any
    machine. Such a component is compared against that bound, not noise against noise."""
    lam = (ref_coords * ref_coords).sum(axis=1)  # (batch, k) eigenvalues: sums of squared coordinates
    n = ref_coords.shape[1]
    return lam <= 64 * n * np.finfo(np.float64).eps * lam.max(axis=1, keepdims=True)


def assert_matches_sklearn(x: np.ndarray, k: int = 2) -> None:
    """Coordinates (signs included) and explained variance ratios within 1e-9 of scikit-learn's: a component with a
    real variance moves by ~ n eps ||G|| / gap between implementations (seen: below 1e-13 here), far inside 1e-9;
    a noise component (noise_components) is held to its noise bound instead."""
    coords, ratio = pca(x, k)
    ref_coords, ref_ratio = sklearn_pca(x, k)
    assert coords.dtype == np.float64 and ratio.dtype == np.float64
    assert coords.shape == ref_coords.shape and ratio.shape == ref_ratio.shape
    noise = noise_components(ref_coords)  # (batch, k)
    lam_max = (ref_coords * ref_coords).sum(axis=1).max(axis=1)  # (batch,)
    bound = np.sqrt(64 * x.shape[1] * np.finfo(np.float64).eps * lam_max)[:, None, None]
    real = ~noise[:, None, :]
    assert np.abs(np.where(real, coords - ref_coords, 0.0)).max() < 1e-9
    assert (np.abs(np.where(real, 0.0, coords)) <= bound).all() and (
        np.abs(np.where(real, 0.0, ref_coords)) <= bound
    ).all()
    assert np.abs(ratio - ref_ratio).max() < 1e-9


@pytest.mark.parametrize("shape", [(11, 50), (11, 100), (5, 3), (2, 50), (30, 10)])
def test_matches_sklearn_on_gaussian_batches(shape):
    """Coordinates (with sklearn's signs) and explained variance ratios equal sklearn's PCA per batch element."""
    rng = np.random.default_rng(sum(shape))
    assert_matches_sklearn(rng.normal(size=(4, *shape)) * rng.uniform(0.5, 3.0, size=(4, 1, shape[1])))


def test_matches_sklearn_with_more_components():
    """n_components other than 2 (up to min(n, d)) still agrees with sklearn."""
    rng = np.random.default_rng(7)
    assert_matches_sklearn(rng.normal(size=(3, 12, 8)), k=3)
    assert_matches_sklearn(rng.normal(size=(2, 6, 6)), k=6)


def test_matches_sklearn_on_weighted_embedding_plus_encoding():
    """The pipeline's W1 * E + W2 * PE matrices (random E, real sinusoidal PE) project as sklearn projects them."""
    rng = np.random.default_rng(0)
    n, d = 11, 50
    e = rng.normal(scale=0.4, size=(n, d))
    pe = sinusoidal_encoding(100, d, dtype=torch.float64).numpy()
    positions = rng.permutation(100)[:n]
    weights = [(1, 0), (1, 1), (1, 10), (10, 1), (math.sqrt(d), 1), (0.5, 3)]
    coords, ratio = weighted_pca(e, pe[positions], *zip(*weights))
    ref_coords, ref_ratio = sklearn_pca(np.stack([w1 * e + w2 * pe[positions] for w1, w2 in weights]))
    assert np.abs(coords - ref_coords).max() < 1e-9 and np.abs(ratio - ref_ratio).max() < 1e-9


def test_float32_input_computed_in_float64():
    """float32 input gives float64 results equal to sklearn on the same values in float64."""
    rng = np.random.default_rng(3)
    x32 = rng.normal(size=(3, 11, 50)).astype(np.float32)
    coords, ratio = pca(x32)
    assert coords.dtype == np.float64 and ratio.dtype == np.float64
    ref_coords, ref_ratio = sklearn_pca(x32.astype(np.float64))
    assert np.abs(coords - ref_coords).max() < 1e-9
    assert np.abs(ratio - ref_ratio).max() < 1e-9


def test_sign_convention_largest_loading_positive():
    """Flipping the data's sign does not flip the coordinates' convention: sklearn's and ours agree either way."""
    rng = np.random.default_rng(11)
    x = rng.normal(size=(1, 9, 5))
    assert_matches_sklearn(-x)
    coords_pos, _ = pca(x)
    coords_neg, _ = pca(-x)
    # -x has the same components up to sign; the convention re-flips them, so coords change sign (ours on both
    # sides: the same bits on every machine, apart by rounding only)
    assert np.abs(coords_neg + coords_pos).max() < 1e-9


def test_shift_invariance():
    """Adding the same vector to every sample leaves the coordinates and ratios unchanged."""
    rng = np.random.default_rng(5)
    x = rng.normal(size=(2, 11, 50))
    shift = rng.normal(scale=100.0, size=(2, 1, 50))
    c0, r0 = pca(x)
    c1, r1 = pca(x + shift)
    # ours on both sides: centring values of size 100 costs ~100 eps a coordinate, far inside both bounds
    assert np.abs(c1 - c0).max() < 1e-9
    assert np.abs(r1 - r0).max() < 1e-12


def test_constant_matrix_gives_zero_ratio_not_nan():
    """All samples identical: coordinates and ratios are zeros (sklearn would divide by zero), never NaN."""
    coords, ratio = pca(np.ones((1, 6, 4)))
    assert not np.isnan(coords).any() and not np.isnan(ratio).any()
    assert np.abs(coords).max() == 0.0 and np.abs(ratio).max() == 0.0


@pytest.mark.parametrize("shape", [(2, 11, 50, 1), (50,)])
def test_input_of_another_rank_raises(shape):
    """Input that is neither (sentences, n, d) nor (n, d) raises ValueError."""
    with pytest.raises(ValueError, match="same shape"):
        weighted_pca(np.zeros(shape), np.zeros(shape), [1.0], [0.0])


@pytest.mark.parametrize("shape,k", [((1, 2, 50), 3), ((1, 50, 2), 3), ((1, 5, 5), 6)])
def test_too_many_components_raises(shape, k):
    """n_components > min(n_samples, n_features) raises ValueError (as sklearn refuses it)."""
    with pytest.raises(ValueError):
        PCA(n_components=k).fit(np.random.default_rng(0).normal(size=shape[1:]))
    with pytest.raises(ValueError, match="n_components"):
        pca(np.zeros(shape), k=k)


# ---------------------------------------------------------------- procrustes


def test_disparity_equals_scipy():
    """procrustes_disparity is scipy.spatial.procrustes's disparity, for tensors, arrays and lists."""
    rng = np.random.default_rng(1)
    for _ in range(5):
        a, b = rng.normal(size=(11, 2)), rng.normal(size=(11, 2))
        expected = procrustes(a, b)[2]
        assert 0.0 < expected < 1.0
        # scipy's disparity moves by machine by ~5e-15 at most (BLAS's dot in its normalisation, LAPACK's SVD)
        assert abs(procrustes_disparity(a, b) - expected) < 1e-12
        assert abs(procrustes_disparity(torch.as_tensor(a), torch.as_tensor(b)) - expected) < 1e-12
        assert (
            abs(
                procrustes_disparity(a.tolist(), b.astype(np.float32))
                - procrustes(a, b.astype(np.float32).astype(np.float64))[2]
            )
            < 1e-12
        )


def test_disparity_zero_for_similar_copy():
    """A rotated, reflected, scaled and shifted copy has disparity ~0; the comparison is not trivially zero."""
    rng = np.random.default_rng(2)
    a = rng.normal(size=(11, 2))
    rot = ortho_group.rvs(2, random_state=4)
    reflect = np.diag([1.0, -1.0])
    b = 3.7 * a @ rot @ reflect + np.array([5.0, -2.0])
    assert procrustes_disparity(a, b) < 1e-12  # ours against the exact 0: rounding noise of a number in [0, 1]
    assert procrustes_disparity(a, a) < 1e-12
    assert procrustes_disparity(a, rng.normal(size=(11, 2))) > 1e-3


@pytest.mark.parametrize("which", ["other", "reference", "both"])
def test_disparity_nan_for_collapsed_projection(which):
    """A projection with all points identical has no shape: nan, not an exception or a number."""
    rng = np.random.default_rng(3)
    a = rng.normal(size=(11, 2))
    collapsed = np.tile([0.3, -1.2], (11, 1))
    ref, other = {"other": (a, collapsed), "reference": (collapsed, a), "both": (collapsed, collapsed)}[which]
    assert math.isnan(procrustes_disparity(ref, other))


def test_disparity_defined_for_points_on_a_line():
    """Points spread along one axis only (not collapsed) still get scipy's number, not nan."""
    a = np.column_stack([np.arange(6.0), np.zeros(6)])
    b = np.column_stack([np.arange(6.0) ** 2, np.ones(6)])
    expected = procrustes(a, b)[2]
    assert abs(procrustes_disparity(a, b) - expected) < 1e-12  # as above: scipy's spread is ~5e-15


# ---------------------------------------------------------------- weighted_pca: the sweep's Gram-trick PCA


def weighted_batch(d: int, sentences: int, n: int = 11, seed: int = 0):
    """GloVe-like random embeddings and real sinusoidal PE rows for `sentences` sentences of n words."""
    rng = np.random.default_rng(seed)
    e = rng.normal(scale=0.4, size=(sentences, n, d))
    pe = sinusoidal_encoding(100, d, dtype=torch.float64).numpy()
    p = np.stack([pe[rng.permutation(100)[:n]] for _ in range(sentences)])
    return e, p


@pytest.mark.parametrize("d,n", [(50, 11), (8, 11), (600, 7), (50, 3)])
def test_weighted_pca_matches_sklearn_per_sentence_and_pair(d, n):
    """Every (sentence, pair): coordinates with sklearn's signs and explained variance ratios (d=600 goes through
    sklearn's randomized solver, d=8 has n > d)."""
    e, p = weighted_batch(d, 3, n)
    w1 = [1, 1, 10, math.sqrt(d), 0.5, 0.0, 2.0]
    w2 = [0, 10, 1, 1, 3.0, 1.0, -1.5]
    coords, ratio = weighted_pca(e, p, w1, w2)
    assert coords.shape == (3, 7, n, 2) and ratio.shape == (3, 7, 2) and coords.dtype == np.float64
    for s in range(3):
        ref_coords, ref_ratio = sklearn_pca(np.stack([a * e[s] + b * p[s] for a, b in zip(w1, w2)]))
        assert np.abs(coords[s] - ref_coords).max() < 1e-9
        assert np.abs(ratio[s] - ref_ratio).max() < 1e-9


def test_weighted_pca_of_one_sentence_with_more_components():
    """A single (n, d) sentence drops the sentence axis; k = 3 agrees with sklearn."""
    e, p = weighted_batch(20, 1, seed=3)
    w1, w2 = np.array([1.0, 4.0, 0.3]), np.array([0.0, 1.0, 2.0])
    coords, ratio = weighted_pca(e[0], p[0], w1, w2, n_components=3)
    assert coords.shape == (3, 11, 3) and ratio.shape == (3, 3)
    ref_coords, ref_ratio = sklearn_pca(w1[:, None, None] * e[0] + w2[:, None, None] * p[0], 3)
    # the module docstring's bounds (gaps of at least 10% here); ratios move by ~n eps, 1e-12 is ~400 times that
    assert np.abs(coords - ref_coords).max() < 1e-9 and np.abs(ratio - ref_ratio).max() < 1e-12


def test_weighted_pca_has_each_sentences_and_pairs_own_bits():
    """A sentence's projections have the same bits alone, among other sentences, and among fewer pairs."""
    e, p = weighted_batch(50, 6, seed=9)
    w1, w2 = np.r_[1.0, np.ones(40), 7.0], np.r_[0.0, np.logspace(-2, 2, 40), 1.0]
    coords, ratio = weighted_pca(e, p, w1, w2)
    for s in range(6):
        alone, alone_ratio = weighted_pca(e[s], p[s], w1, w2)
        assert alone.tobytes() == coords[s].tobytes() and alone_ratio.tobytes() == ratio[s].tobytes()
        few, few_ratio = weighted_pca(e[s], p[s], w1[5:9], w2[5:9])
        assert few.tobytes() == coords[s, 5:9].tobytes() and few_ratio.tobytes() == ratio[s, 5:9].tobytes()


def test_weighted_pca_sign_convention_and_float32():
    """Negating the data keeps sklearn's orientation (coordinates flip sign); float32 inputs compute in float64."""
    e, p = weighted_batch(50, 2, seed=5)
    w1, w2 = [1.0, 1.0, 3.0], [0.0, 10.0, 1.0]
    pos, _ = weighted_pca(e, p, w1, w2)
    neg, _ = weighted_pca(-e, -p, w1, w2)
    assert np.abs(pos + neg).max() < 1e-9  # ours on both sides
    c32, r32 = weighted_pca(e.astype(np.float32), p.astype(np.float32), w1, w2)
    assert c32.dtype == r32.dtype == np.float64
    e32, p32 = e.astype(np.float32).astype(np.float64), p.astype(np.float32).astype(np.float64)
    for s in range(2):
        ref, _ = sklearn_pca(np.stack([a * e32[s] + b * p32[s] for a, b in zip(w1, w2)]))
        assert np.abs(c32[s] - ref).max() < 1e-9


def test_weighted_pca_zero_weights_give_zeros_not_nan():
    e, p = weighted_batch(8, 1, n=5)
    coords, ratio = weighted_pca(e, p, [0.0], [0.0])
    assert not np.isnan(coords).any() and not np.isnan(ratio).any()
    assert np.abs(coords).max() == 0.0 and np.abs(ratio).max() == 0.0


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"n_components": 12}, "n_components"),
        ({"n_components": 0}, "n_components"),
        ({"w2": [1.0, 2.0]}, "w1"),
    ],
)
def test_weighted_pca_bad_arguments(kwargs, match):
    e, p = weighted_batch(8, 2)
    args = {"w1": [1.0], "w2": [1.0], **kwargs}
    with pytest.raises(ValueError, match=match):
        weighted_pca(e, p, **args)
    with pytest.raises(ValueError, match="same shape"):
        weighted_pca(e, p[:, :5], [1.0], [1.0])


# ---------------------------------------------------------------- the sweep of one sentence (pipeline.core.sweep)


def test_sweep_project_is_sklearn_pca_at_fixed_precision():
    from pipeline.base.files import round_significant
    from pipeline.core.sweep import project
    from pipeline.core.weights import weight_pairs

    e, p = (x[0] for x in weighted_batch(16, 1, n=9))
    pairs = weight_pairs([1, 10], [10, 1], d_model=16)
    coords, explained = project(e, p, pairs)
    assert coords.shape == (3, 9, 2) and explained.shape == (3, 2)
    for j, pair in enumerate(pairs):
        pca = PCA(n_components=2).fit(pair.w1 * e + pair.w2 * p)
        # ours is rounded to 12 significant digits of the largest coordinate (5e-11 here) and of each ratio (5e-13);
        # scikit-learn's machine spread is below 1e-11 (the module docstring)
        np.testing.assert_allclose(coords[j], pca.transform(pair.w1 * e + pair.w2 * p), atol=1e-9)
        np.testing.assert_allclose(explained[j], pca.explained_variance_ratio_, atol=1e-11)
    floor = np.abs(coords).max(axis=(1, 2), keepdims=True)
    assert np.array_equal(round_significant(coords, floor=floor), coords)


def test_sweep_sentence_measures_pairs_grid_and_scaling():
    from pipeline.core.metrics import crossover, positional_wins
    from conftest import sweep_sentence
    from pipeline.core.sweep import SCALING_METRICS
    from pipeline.core.weights import weight_pairs

    e, p = (x[0] for x in weighted_batch(16, 1))
    words = [f"w{i}" for i in range(11)]
    ratios = np.logspace(-2, 2, 9)
    pairs = weight_pairs([1, 1], [1, 10], d_model=16)
    result = sweep_sentence(e, p, words, pairs, ratios, 16, groups=[["w0", "w1"]], neighbours=3)
    assert result.coords.shape == (3, 11, 2) and result.grid_coords.shape == (9, 11, 2)
    assert list(result.pairs) == ["w1_1-w2_0", "w1_1-w2_1", "w1_1-w2_10"]
    assert result.pairs["w1_1-w2_0"]["pca_disparity"] == 0.0 and result.pairs["w1_1-w2_0"]["knn_semantic_hd"] == 1.0
    assert all(len(values) == 9 for values in result.curves.values())
    wins = positional_wins(result.curves["knn_semantic_hd"], result.curves["knn_positional_hd"])
    assert result.crossover["r_star"] == crossover(
        ratios, wins, [(point["r"], point["to"] == "position") for point in result.crossover["switch_points"].values()]
    )
    assert set(result.scaling) == {*SCALING_METRICS, "semantic_dominates"}
    # the grid point r = 1 is the configured pair W1 = W2 = 1
    assert result.curves["knn_semantic_hd"][4] == result.pairs["w1_1-w2_1"]["knn_semantic_hd"]
