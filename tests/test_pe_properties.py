"""The property scores (pipeline.core.pe_properties) in float64: against independent implementations written here
(Chen et al.'s as the authors' calculate.py computes them, tigerchen52/locality_symmetry, with scikit-learn's own
MinMaxScaler; Spearman's correlation from scipy), and cases with a known answer."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import spearmanr
from sklearn.preprocessing import MinMaxScaler

from pipeline.core import alibi
from pipeline.core import pe_properties as pp


def authors_locality(m):
    """calculate.matrix_locality, as the authors wrote it (loops, Python sums)."""
    length = len(m)
    sums = []
    for index in range(length):
        factor = [1 / (2 ** abs(i - index)) for i in range(length)]
        sums.append(sum(m[index][i] * factor[i] for i in range(length)))
    return sum(sums) / len(sums)


def authors_symmetry(m):
    """calculate.cal_matrix_symmetry, as the authors wrote it, with scikit-learn's MinMaxScaler itself."""
    n = len(m)
    values = []
    for index in range(n):
        left, right = list(m[index][0:index]), list(m[index][index + 1 : n])
        shortest = min(len(left), len(right))
        if shortest == 0:
            continue
        left_seq, right_seq = left[-shortest:], list(reversed(right[:shortest]))
        vec = np.array([abs(left_seq[j] - right_seq[j]) for j in range(len(left_seq))]).reshape(-1, 1)
        values.extend(v[0] for v in MinMaxScaler().fit_transform(vec))
    return 1 - sum(values) / len(values)


def random_attention(n, seed):
    return pp.softmax_rows(np.random.default_rng(seed).standard_normal((n, n)) * 2)


@pytest.mark.parametrize("n, seed", [(5, 0), (16, 1), (33, 2), (64, 3)])
def test_chen_against_the_authors_code(n, seed):
    """Equal up to the order of the sums (Python's left to right against numpy's pairwise): a few ulp of ~0.5."""
    a = random_attention(n, seed)
    # plain IEEE sums on both sides, the same bits on every machine; their orders differ: the authors' recursive
    # sums of n^2 positive terms are within 2 n eps (1.5e-14 at n = 33) of ours
    assert pp.chen_locality(a) == pytest.approx(authors_locality(a), rel=1e-13)
    assert pp.chen_symmetry(a) == pytest.approx(authors_symmetry(a), rel=1e-13)


def test_chen_symmetry_near_constant_rows_follow_the_authors_rule():
    """MinMaxScaler treats a row whose range is below 10 eps (2.2e-15) as constant (only shifted), any other row is
    stretched to [0, 1]. A symmetric prior with differences of 1e-16 (rounding) scores 1; with differences of 1e-14
    (still rounding-sized next to weights of 0.05) the authors' rule scores it as asymmetric as a random one. A
    tolerance relative to the row's largest weight (this project's earlier rule, 1e-12 of it) would score both 1."""
    n = 20
    exact = pp.softmax_rows(pp.toeplitz(-np.abs(np.arange(-(n - 1), n, dtype=float)) / 4, n))
    assert pp.chen_symmetry(exact) == authors_symmetry(exact) == 1.0
    wiggle = np.random.default_rng(7).uniform(0, 1, (n, n))
    for size, below in ((1e-16, True), (1e-14, False)):
        a = exact + size * wiggle
        assert pp.chen_symmetry(a) == pytest.approx(authors_symmetry(a), rel=1e-13, abs=1e-15), size
        if below:
            assert pp.chen_symmetry(a) > 1 - 1e-14
        else:
            assert pp.chen_symmetry(a) < 0.8
            assert size < 1e-12 * a.max()  # what a relative tolerance would have zeroed


def test_chen_symmetry_flags_asymmetry_not_its_size():
    """A 1e-9 antisymmetric perturbation of a symmetric prior takes the score from 1 to 0.54 (each row's differences
    are stretched to [0, 1]), as a perturbation of 0.01 does: the score counts asymmetric offsets, it does not
    measure their size."""
    n = 32
    base = pp.softmax_rows(pp.toeplitz(-np.abs(np.arange(-(n - 1), n, dtype=float)) / 8, n))
    offsets = np.arange(-(n - 1), n)
    size = np.random.default_rng(3).uniform(0.5, 1.0, n)  # by |offset|: f(-k) = -f(k)
    antisymmetric = pp.toeplitz(np.sign(offsets) * size[np.abs(offsets)], n)
    small, large = (pp.chen_symmetry(base + eps * antisymmetric) for eps in (1e-9, 1e-2))
    assert pp.chen_symmetry(base) == 1.0
    assert 0.5 < small < 0.6
    assert small == pytest.approx(large, abs=1e-6)  # 1.5e-9 apart: the larger perturbation moves the prior's rows


def test_chen_symmetry_under_a_causal_mask_measures_the_mask():
    """Causal uniform attention scores 1 and causal ALiBi 0.625 under the authors' code: the zeros after the query
    stand in for keys; why the families table leaves the cell undefined."""
    n = 64
    uniform = np.tril(np.ones((n, n))) / np.arange(1, n + 1)[:, None]
    assert authors_symmetry(uniform) == pytest.approx(1.0, abs=1e-12)
    biases = alibi.bias(alibi.slopes(8), n, causal=True).numpy()
    mean = np.mean([authors_symmetry(pp.softmax_rows(b)) for b in biases])
    assert mean == pytest.approx(0.625, abs=0.01)


def test_chen_known_cases():
    n = 12
    assert pp.chen_locality(np.eye(n)) == 1.0
    assert pp.chen_locality(np.full((n, n), 1 / n)) == pytest.approx(authors_locality(np.full((n, n), 1 / n)))
    assert pp.chen_symmetry(np.full((n, n), 1 / n)) == 1.0
    exact = pp.softmax_rows(pp.toeplitz(-np.abs(np.arange(-(n - 1), n, dtype=float)), n))
    assert pp.chen_symmetry(exact) == 1.0


def test_min_max_scaled_is_scikit_learns():
    rng = np.random.default_rng(9)
    for values in (rng.uniform(0, 1, 17), np.full(5, 0.25), 0.1 + 1e-16 * rng.uniform(0, 1, 9), np.array([3.0])):
        expected = MinMaxScaler().fit_transform(values.reshape(-1, 1))[:, 0]
        np.testing.assert_array_equal(pp.min_max_scaled(values), expected)


def loop_monotonicity(p):
    """Wang et al.'s monotonicity written out with scipy's Spearman correlation, one row side at a time."""
    n = p.shape[0]
    values = []
    for i in range(n):
        for side in (np.arange(i + 1, n), np.arange(i - 1, -1, -1)):
            row = p[i, side]
            keep = np.isfinite(row)
            if keep.sum() >= 2 and np.ptp(row[keep]) > 0:
                values.append(spearmanr(row[keep], -np.abs(side[keep] - i)).statistic)
    return float(np.mean(values)) if values else None


@pytest.mark.parametrize("n", [5, 16, 40])
def test_monotonicity_against_scipy(n):
    """Random proximities, with ties (integers) and with masked entries (-inf, scattered and causal): the batched
    ranking equals scipy's Spearman row side by row side, up to the order of the sums."""
    rng = np.random.default_rng(n)
    scattered = rng.standard_normal((n, n))
    scattered[rng.random((n, n)) < 0.15] = -np.inf
    causal = np.where(np.tri(n, dtype=bool), rng.standard_normal((n, n)), -np.inf)
    ties = rng.integers(0, 3, (n, n)).astype(float)
    many = [rng.standard_normal((n, n)), scattered, causal, ties]
    got = pp.wang_monotonicity_many(np.stack(many))
    for p, value in zip(many, got):
        assert value == pytest.approx(loop_monotonicity(p), rel=1e-12, abs=1e-14)
        assert pp.wang_monotonicity(p) == value


def test_spearman_with_ties():
    rng = np.random.default_rng(3)
    x, y = rng.integers(0, 4, 30).astype(float), rng.standard_normal(30)
    # scipy's sums of 30 rank products move by machine by ~30 eps of them: ~1e-14 on a correlation of 0.16
    assert pp.spearman(x, y) == pytest.approx(spearmanr(x, y).statistic, rel=1e-12)
    assert pp.spearman(np.ones(5), y[:5]) is None


def test_translation_invariance_of_a_nearly_constant_toeplitz_matrix_is_exactly_one():
    """Diagonals of 1e6 + a variation of 1e-4 (RoPE at the schema's largest scale looks like this): averaging a
    diagonal's equal values unshifted is off by ~n eps 1e6, whose square beside the variance (~1e-8) moved the score by
    ~1e-9; shifted by one of their own values, the residuals are exactly zero."""
    n = 300
    profile = 1e6 + 1e-4 * np.cos(0.1 * np.arange(n))
    p = profile[np.abs(np.arange(n)[:, None] - np.arange(n)[None, :])]
    assert pp.wang_translation_invariance(p) == 1.0
    broken = p.copy()
    broken[3, 5] += 1e-5
    assert 0.9 < pp.wang_translation_invariance(broken) < 1.0


def test_wang_known_cases():
    n = 20
    rng = np.random.default_rng(4)
    profile = rng.standard_normal(2 * n - 1)
    t = pp.toeplitz(profile, n)
    # ours (the same bits everywhere) against the exact answer: the within-diagonal variance is rounding noise
    assert pp.wang_translation_invariance(t) == pytest.approx(1.0, abs=1e-15)
    s = rng.standard_normal((n, n))
    assert pp.wang_symmetry(s + s.T) == 1.0
    assert pp.wang_symmetry(s - s.T) == pytest.approx(0.0, abs=1e-15)
    zeros = np.zeros((n, n))
    assert pp.wang_translation_invariance(zeros) is None and pp.wang_monotonicity(zeros) is None
    assert pp.wang_symmetry(zeros) is None
    decreasing = pp.toeplitz(-np.abs(np.arange(-(n - 1), n, dtype=float)), n)
    assert pp.wang_monotonicity(decreasing) == 1.0 and pp.wang_monotonicity(-decreasing) == -1.0


@pytest.mark.parametrize("causal", [True, False])
def test_alibi_bias_exactly_monotone_and_translation_invariant(causal):
    biases = alibi.bias(alibi.slopes(8), 24, causal=causal).numpy()
    for b in biases:
        assert pp.wang_monotonicity(b) == 1.0
        assert pp.wang_translation_invariance(b) == pytest.approx(1.0, abs=1e-15)
        assert pp.wang_symmetry(b) == (None if causal else 1.0)


def test_translation_invariance_is_the_variance_share_of_the_offset():
    """eta^2 against a loop over diagonals."""
    n = 9
    p = np.random.default_rng(5).standard_normal((n, n))
    diag = [np.diagonal(p, k) for k in range(-(n - 1), n)]
    within = sum(((d - d.mean()) ** 2).sum() for d in diag)
    # numpy's own reductions on both sides (no CPU dispatch): the same bits everywhere; summation orders differ by
    # ~n^2 eps relative to the variances, 5e-14 at most on a share of 0.17
    assert pp.wang_translation_invariance(p) == pytest.approx(1 - within / ((p - p.mean()) ** 2).sum(), rel=1e-13)


def test_symmetry_against_frobenius_parts():
    p = np.random.default_rng(6).standard_normal((7, 7))
    c = p - p.mean()
    s, k = np.linalg.norm((c + c.T) / 2) ** 2, np.linalg.norm((c - c.T) / 2) ** 2
    # np.linalg.norm is BLAS's dot of 49 squares (by machine, 49 eps relative at most): s / (s + k) within 1e-14
    assert pp.wang_symmetry(p) == pytest.approx(s / (s + k), rel=1e-13)


@pytest.mark.parametrize("cmap", ["viridis", "viridis_r", "magma", "Greys"])
def test_heatmap_numbers_are_dark_on_light_cells_and_light_on_dark_ones(cmap):
    """pe_properties.png writes each score on its cell: black where the cell is light, white where it is dark,
    for any colour map (viridis is light at 1, viridis_r at 0)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from pipeline.figures.families import readable_on

    figure, ax = plt.subplots()
    image = ax.imshow(np.array([[0.0, 1.0]]), cmap=cmap, vmin=0.0, vmax=1.0)
    for value in (0.0, 1.0):
        r, g, b, _ = image.cmap(image.norm(value))
        light = 0.2126 * r + 0.7152 * g + 0.0722 * b > 0.5
        assert readable_on(image, value) == ("black" if light else "white"), (cmap, value)
    assert readable_on(image, float("nan")) == "black"  # a blank (undefined) cell is white
    plt.close(figure)
