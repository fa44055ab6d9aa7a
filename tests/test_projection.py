"""pipeline.core.projection against scikit-learn's PCA and scipy's procrustes."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.spatial import procrustes
from scipy.stats import ortho_group
from sklearn.decomposition import PCA

from pipeline.core.encoding import sinusoidal_encoding
from pipeline.core.projection import pca_project, procrustes_disparity, weighted_pca


def sklearn_pca(batch: np.ndarray, k: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's coordinates and explained variance ratios for every matrix of a batch (float64)."""
    coords, ratios = [], []
    for m in np.asarray(batch, dtype=np.float64):
        pca = PCA(n_components=k)
        coords.append(pca.fit_transform(m))
        ratios.append(pca.explained_variance_ratio_)
    return np.stack(coords), np.stack(ratios)


def assert_matches_sklearn(x: np.ndarray, k: int = 2) -> None:
    coords, ratio = pca_project(torch.as_tensor(x), n_components=k)
    ref_coords, ref_ratio = sklearn_pca(x, k)
    assert coords.dtype == torch.float64 and ratio.dtype == torch.float64
    assert coords.shape == ref_coords.shape and ratio.shape == ref_ratio.shape
    assert np.abs(coords.numpy() - ref_coords).max() < 1e-9  # signs included
    assert np.abs(ratio.numpy() - ref_ratio).max() < 1e-9


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
    batch = np.stack([w1 * e + w2 * pe[positions] for w1, w2 in weights])
    assert_matches_sklearn(batch)


def test_float32_input_computed_in_float64():
    """float32 input gives float64 results equal to sklearn on the same values in float64."""
    rng = np.random.default_rng(3)
    x32 = rng.normal(size=(3, 11, 50)).astype(np.float32)
    coords, ratio = pca_project(torch.as_tensor(x32))
    assert coords.dtype == torch.float64 and ratio.dtype == torch.float64
    ref_coords, ref_ratio = sklearn_pca(x32.astype(np.float64))
    assert np.abs(coords.numpy() - ref_coords).max() < 1e-9
    assert np.abs(ratio.numpy() - ref_ratio).max() < 1e-9


def test_sign_convention_largest_loading_positive():
    """Flipping the data's sign does not flip the coordinates' convention: sklearn's and ours agree either way."""
    rng = np.random.default_rng(11)
    x = rng.normal(size=(1, 9, 5))
    assert_matches_sklearn(-x)
    coords_pos, _ = pca_project(torch.as_tensor(x))
    coords_neg, _ = pca_project(torch.as_tensor(-x))
    # -x has the same components up to sign; the convention re-flips them, so coords change sign
    assert np.abs(coords_neg.numpy() + coords_pos.numpy()).max() < 1e-9


def test_shift_invariance():
    """Adding the same vector to every sample leaves the coordinates and ratios unchanged."""
    rng = np.random.default_rng(5)
    x = rng.normal(size=(2, 11, 50))
    shift = rng.normal(scale=100.0, size=(2, 1, 50))
    c0, r0 = pca_project(torch.as_tensor(x))
    c1, r1 = pca_project(torch.as_tensor(x + shift))
    assert np.abs(c1.numpy() - c0.numpy()).max() < 1e-9
    assert np.abs(r1.numpy() - r0.numpy()).max() < 1e-12


def test_constant_matrix_gives_zero_ratio_not_nan():
    """All samples identical: coordinates and ratios are zeros (sklearn would divide by zero), never NaN."""
    coords, ratio = pca_project(torch.ones(1, 6, 4))
    assert not torch.isnan(coords).any() and not torch.isnan(ratio).any()
    assert coords.abs().max().item() == 0.0 and ratio.abs().max().item() == 0.0


@pytest.mark.parametrize("shape", [(11, 50), (2, 11, 50, 1), (50,)])
def test_non_3d_input_raises(shape):
    """Input that is not (batch, n_samples, n_features) raises ValueError."""
    with pytest.raises(ValueError):
        pca_project(torch.zeros(shape))


@pytest.mark.parametrize("shape,k", [((1, 2, 50), 3), ((1, 50, 2), 3), ((1, 5, 5), 6)])
def test_too_many_components_raises(shape, k):
    """n_components > min(n_samples, n_features) raises ValueError (as sklearn refuses it)."""
    with pytest.raises(ValueError):
        PCA(n_components=k).fit(np.random.default_rng(0).normal(size=shape[1:]))
    with pytest.raises(ValueError):
        pca_project(torch.zeros(shape), n_components=k)


# ---------------------------------------------------------------- procrustes


def test_disparity_equals_scipy():
    """procrustes_disparity is scipy.spatial.procrustes's disparity, for tensors, arrays and lists."""
    rng = np.random.default_rng(1)
    for _ in range(5):
        a, b = rng.normal(size=(11, 2)), rng.normal(size=(11, 2))
        expected = procrustes(a, b)[2]
        assert 0.0 < expected < 1.0
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
    assert procrustes_disparity(a, b) < 1e-12
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
    assert abs(procrustes_disparity(a, b) - expected) < 1e-12


# ---------------------------------------------------------------- weighted_pca: the sweep's Gram-trick PCA

CUDA = torch.cuda.is_available()


def weighted_batch(d: int, lengths: list[int], n: int = 11, seed: int = 0):
    """GloVe-like random embeddings and real sinusoidal PE rows (padded to n) for len(lengths) sentences."""
    rng = np.random.default_rng(seed)
    e = rng.normal(scale=0.4, size=(len(lengths), n, d))
    pe = sinusoidal_encoding(100, d, dtype=torch.float64).numpy()
    p = np.stack([pe[rng.permutation(100)[:n]] for _ in lengths])
    return e, p


@pytest.mark.parametrize("d", [50, 8, 600])
def test_weighted_pca_matches_sklearn_per_sentence_and_pair(d):
    """Every (sentence, pair): coordinates with sklearn's signs and explained variance ratios; sentences of
    different lengths padded (d=600 goes through sklearn's randomized solver, d=8 has n > d)."""
    lengths = [11, 7, 3]
    e, p = weighted_batch(d, lengths)
    w1 = [1, 1, 10, math.sqrt(d), 0.5, 0.0, 2.0]
    w2 = [0, 10, 1, 1, 3.0, 1.0, -1.5]
    coords, ratio = weighted_pca(torch.as_tensor(e), torch.as_tensor(p), w1, w2, lengths)
    assert coords.shape == (3, 7, 11, 2) and ratio.shape == (3, 7, 2) and coords.dtype == torch.float64
    for s, n in enumerate(lengths):
        ref_coords, ref_ratio = sklearn_pca(np.stack([a * e[s, :n] + b * p[s, :n] for a, b in zip(w1, w2)]))
        assert np.abs(coords[s, :, :n].numpy() - ref_coords).max() < 1e-9
        assert np.abs(ratio[s].numpy() - ref_ratio).max() < 1e-9
        assert not coords[s, :, n:].any()  # padding rows stay zero


def test_weighted_pca_equals_pca_project_and_more_components():
    """Same numbers as the SVD path on the formed matrices, for k = 3 and a single (n, d) sentence."""
    e, p = weighted_batch(20, [11], seed=3)
    w1, w2 = np.array([1.0, 4.0, 0.3]), np.array([0.0, 1.0, 2.0])
    coords, ratio = weighted_pca(torch.as_tensor(e[0]), torch.as_tensor(p[0]), w1, w2, n_components=3)
    assert coords.shape == (3, 11, 3) and ratio.shape == (3, 3)
    x = torch.as_tensor(w1[:, None, None] * e[0] + w2[:, None, None] * p[0])
    svd_coords, svd_ratio = pca_project(x, n_components=3)
    assert (coords - svd_coords).abs().max().item() < 1e-9 and (ratio - svd_ratio).abs().max().item() < 1e-12
    ref_coords, ref_ratio = sklearn_pca(x.numpy(), 3)
    assert np.abs(coords.numpy() - ref_coords).max() < 1e-9


def test_weighted_pca_sign_convention_and_float32():
    """Negating the data keeps sklearn's orientation (coordinates flip sign); float32 inputs compute in float64."""
    e, p = weighted_batch(50, [11, 11], seed=5)
    w1, w2 = [1.0, 1.0, 3.0], [0.0, 10.0, 1.0]
    pos, _ = weighted_pca(torch.as_tensor(e), torch.as_tensor(p), w1, w2)
    neg, _ = weighted_pca(torch.as_tensor(-e), torch.as_tensor(-p), w1, w2)
    assert (pos + neg).abs().max().item() < 1e-9
    c32, r32 = weighted_pca(torch.as_tensor(e.astype(np.float32)), torch.as_tensor(p.astype(np.float32)), w1, w2)
    assert c32.dtype == r32.dtype == torch.float64
    e32, p32 = e.astype(np.float32).astype(np.float64), p.astype(np.float32).astype(np.float64)
    for s in range(2):
        ref, _ = sklearn_pca(np.stack([a * e32[s] + b * p32[s] for a, b in zip(w1, w2)]))
        assert np.abs(c32[s].numpy() - ref).max() < 1e-9


def test_weighted_pca_zero_weights_give_zeros_not_nan():
    e, p = weighted_batch(8, [5])
    coords, ratio = weighted_pca(torch.as_tensor(e), torch.as_tensor(p), [0.0], [0.0])
    assert not torch.isnan(coords).any() and not torch.isnan(ratio).any()
    assert coords.abs().max().item() == 0.0 and ratio.abs().max().item() == 0.0


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"lengths": [11, 0]}, "lengths"),
        ({"lengths": [12, 3]}, "lengths"),
        ({"lengths": [5]}, "lengths"),
        ({"lengths": [11, 2], "n_components": 3}, "n_components"),
        ({"w2": [1.0, 2.0]}, "w1"),
    ],
)
def test_weighted_pca_bad_arguments(kwargs, match):
    e, p = weighted_batch(8, [11, 11])
    args = {"w1": [1.0], "w2": [1.0], **kwargs}
    with pytest.raises(ValueError, match=match):
        weighted_pca(torch.as_tensor(e), torch.as_tensor(p), **args)
    with pytest.raises(ValueError, match="same shape"):
        weighted_pca(torch.as_tensor(e), torch.as_tensor(p[:, :5]), [1.0], [1.0])


@pytest.mark.skipif(not CUDA, reason="needs CUDA")
def test_weighted_pca_on_cuda_equals_cpu():
    e, p = weighted_batch(50, [11, 6])
    w1, w2 = [1.0, 1.0, 10.0], [0.0, 10.0, 1.0]
    cpu = weighted_pca(torch.as_tensor(e), torch.as_tensor(p), w1, w2, [11, 6])
    gpu = weighted_pca(torch.as_tensor(e, device="cuda"), torch.as_tensor(p, device="cuda"), w1, w2, [11, 6])
    assert gpu[0].device.type == "cuda"
    assert (gpu[0].cpu() - cpu[0]).abs().max().item() < 1e-9 and (gpu[1].cpu() - cpu[1]).abs().max().item() < 1e-9


# ---------------------------------------------------------------- the sweep of one sentence (pipeline.core.sweep)


def test_sweep_project_is_sklearn_pca_at_fixed_precision():
    from pipeline.base.files import round_significant
    from pipeline.core.sweep import project
    from pipeline.core.weights import weight_pairs

    e, p = (x[0] for x in weighted_batch(16, [9], n=9))
    pairs = weight_pairs([1, 10], [10, 1], d_model=16)
    coords, explained = project(e, p, pairs)
    assert coords.shape == (3, 9, 2) and explained.shape == (3, 2)
    for j, pair in enumerate(pairs):
        pca = PCA(n_components=2).fit(pair.w1 * e + pair.w2 * p)
        np.testing.assert_allclose(coords[j], pca.transform(pair.w1 * e + pair.w2 * p), atol=1e-9)
        np.testing.assert_allclose(explained[j], pca.explained_variance_ratio_, atol=1e-11)
    floor = np.abs(coords).max(axis=(1, 2), keepdims=True)
    assert np.array_equal(round_significant(coords, floor=floor), coords)


def test_sweep_sentence_measures_pairs_grid_and_scaling():
    from pipeline.core.metrics import crossover, positional_wins
    from pipeline.core.sweep import SCALING_METRICS, sweep_sentence
    from pipeline.core.weights import weight_pairs

    e, p = (x[0] for x in weighted_batch(16, [11]))
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
