"""The property scores (pipeline.core.pe_properties) in float64: against independent implementations written here
(Chen et al.'s from the authors' calculate.py, tigerchen52/locality_symmetry) and cases with a known answer."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from pipeline.core import alibi
from pipeline.core import pe_properties as pp


def authors_locality(m):
    """calculate.matrix_locality, as the authors wrote it (loops)."""
    length = len(m)
    sums = []
    for index in range(length):
        factor = [1 / (2 ** abs(i - index)) for i in range(length)]
        sums.append(sum(m[index][i] * factor[i] for i in range(length)))
    return sum(sums) / len(sums)


def authors_symmetry(m):
    """calculate.cal_matrix_symmetry, with sklearn's MinMaxScaler (a constant column scales to 0) written out."""
    n = len(m)
    values = []
    for index in range(n):
        left, right = list(m[index][0:index]), list(m[index][index + 1 : n])
        shortest = min(len(left), len(right))
        if shortest == 0:
            continue
        left_seq, right_seq = left[-shortest:], list(reversed(right[:shortest]))
        vec = np.array([abs(left_seq[j] - right_seq[j]) for j in range(shortest)])
        span = vec.max() - vec.min()
        values.extend(((vec - vec.min()) / (span if span > 0 else 1.0)).tolist())
    return 1 - sum(values) / len(values)


def random_attention(n, seed):
    return pp.softmax_rows(np.random.default_rng(seed).standard_normal((n, n)) * 2)


@pytest.mark.parametrize("n, seed", [(5, 0), (16, 1), (33, 2)])
def test_chen_against_the_authors_code(n, seed):
    a = random_attention(n, seed)
    # plain IEEE sums on both sides, the same bits on every machine; their orders differ: the authors' recursive
    # sums of n^2 positive terms are within 2 n eps (1.5e-14 at n = 33) of ours
    assert pp.chen_locality(a) == pytest.approx(authors_locality(a), rel=1e-13)
    assert pp.chen_symmetry(a) == pytest.approx(authors_symmetry(a), rel=1e-13)


def test_chen_known_cases():
    n = 12
    assert pp.chen_locality(np.eye(n)) == 1.0
    assert pp.chen_locality(np.full((n, n), 1 / n)) == pytest.approx(authors_locality(np.full((n, n), 1 / n)))
    assert pp.chen_symmetry(np.full((n, n), 1 / n)) == 1.0
    exact = pp.softmax_rows(pp.toeplitz(-np.abs(np.arange(-(n - 1), n, dtype=float)), n))
    assert pp.chen_symmetry(exact) == 1.0


def spearman_reference(x, y):
    """Pearson correlation of average ranks, ranks by counting (independent of pp._ranks)."""

    def ranks(v):
        return np.array([(v < e).sum() + ((v == e).sum() - 1) / 2 for e in v], dtype=float)

    rx, ry = ranks(x), ranks(y)
    return float(np.corrcoef(rx, ry)[0, 1])


def test_spearman_with_ties():
    rng = np.random.default_rng(3)
    x, y = rng.integers(0, 4, 30).astype(float), rng.standard_normal(30)
    # np.corrcoef's BLAS sums of 30 rank products move by machine by ~30 eps of them: ~1e-14 on a correlation of 0.16
    assert pp.spearman(x, y) == pytest.approx(spearman_reference(x, y), rel=1e-12)
    assert pp.spearman(np.ones(5), y[:5]) is None


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
    assert pp.wang_translation_invariance(np.zeros((n, n))) == 1.0 and pp.wang_monotonicity(np.zeros((n, n))) is None
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


def test_rope_expectation_with_k_equal_q_is_the_sinusoid_dot_product():
    """E[sum_i |q_i|^2 cos(delta theta_i)] = 2 sum_i cos(delta theta_i): the sinusoidal PE . PE at d = d_head."""
    from pipeline.core.encoding import sinusoidal_encoding
    from pipeline.core.relative import gaussian_pairs, rope_profiles
    from pipeline.core.rope_scaling import default_frequencies

    d, n = 16, 10
    q, _ = gaussian_pairs(200_000, d, 0)
    offsets = np.arange(n, dtype=float)
    got = rope_profiles(default_frequencies(d, 10000.0), 1.0, q, q, offsets)["self"]
    pe = sinusoidal_encoding(n, d, 10000.0, dtype=torch.float64).numpy()
    # a Monte Carlo mean of 200,000 seeded draws (portable: the same on every machine): its standard error is
    # sqrt(2 d / 200,000) ~ 0.013, the bound 0.8 is 60 of them; a wrong frequency or factor 2 is off by several
    np.testing.assert_allclose(got, 2 * (pe @ pe.T)[0], atol=0.05 * d)


@pytest.mark.parametrize("cmap", ["viridis", "viridis_r", "magma", "Greys"])
def test_heatmap_numbers_are_dark_on_light_cells_and_light_on_dark_ones(cmap):
    """pe_properties.png writes each score on its cell: black where the cell is light, white where it is dark,
    for any colour map (viridis is light at 1, viridis_r at 0)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from pipeline.outputs.relative_figures import readable_on

    figure, ax = plt.subplots()
    image = ax.imshow(np.array([[0.0, 1.0]]), cmap=cmap, vmin=0.0, vmax=1.0)
    for value in (0.0, 1.0):
        r, g, b, _ = image.cmap(image.norm(value))
        light = 0.2126 * r + 0.7152 * g + 0.0722 * b > 0.5
        assert readable_on(image, value) == ("black" if light else "white"), (cmap, value)
    assert readable_on(image, float("nan")) == "black"  # a blank (undefined) cell is white
    plt.close(figure)
