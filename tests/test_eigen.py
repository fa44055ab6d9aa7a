"""pipeline.core.eigen against numpy.linalg.eigh (LAPACK), and its compiled kernel against the same code run by the
interpreter (IEEE double arithmetic, no fused multiply-add): equal bits show that numba keeps every operation as
written."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.core import eigen

EPS = np.finfo(np.float64).eps


def gram_batch(seed: int, count: int, n: int, d: int) -> np.ndarray:
    x = np.random.default_rng(seed).normal(size=(count, n, d)) * np.exp(np.random.default_rng(seed).uniform(-3, 3))
    return x @ np.swapaxes(x, 1, 2)


@pytest.mark.parametrize("n, d", [(1, 3), (2, 5), (5, 2), (11, 50), (40, 60)])
def test_eigenpairs_agree_with_lapack(n, d):
    """Both algorithms are backward stable: eigenvalues within c n eps ||A|| of each other (c = 8, a generous
    constant for Householder + QL, and LAPACK's own error on the other side), the decomposition reconstructs A to the
    same order, the eigenvectors are orthonormal, and each is LAPACK's up to sign where its eigenvalue is separated
    from the others by more than sqrt(eps) ||A|| (closer eigenvalues leave their vectors' basis free)."""
    a = gram_batch(n * 100 + d, 30, n, d)
    values, vectors = eigen.eigh(a)
    ref_values, ref_vectors = np.linalg.eigh(a)
    scale = np.abs(ref_values).max(axis=-1, keepdims=True)
    assert (np.abs(values - ref_values) <= 8 * n * EPS * scale).all()
    assert (np.diff(values, axis=-1) >= 0).all()
    rebuilt = vectors @ (values[..., :, None] * np.swapaxes(vectors, 1, 2))
    assert (np.abs(rebuilt - a).max(axis=(1, 2)) <= 8 * n * EPS * scale[:, 0]).all()
    np.testing.assert_allclose(
        np.swapaxes(vectors, 1, 2) @ vectors, np.broadcast_to(np.eye(n), a.shape), atol=8 * n * EPS
    )
    gaps = np.diff(ref_values, axis=-1)
    separated = np.ones(ref_values.shape, dtype=bool)
    separated[..., 1:] &= gaps > np.sqrt(EPS) * scale
    separated[..., :-1] &= gaps > np.sqrt(EPS) * scale
    dots = np.abs((vectors * ref_vectors).sum(axis=1))  # (count, n): |v_c . ref_c|
    assert (dots[separated] >= 1 - 1e-6).all()


def test_the_compiled_kernel_gives_the_interpreters_bits():
    a = gram_batch(1, 12, 9, 20)
    compiled = eigen.eigh(a, kernel=eigen._kernel())
    interpreted = eigen.eigh(a, kernel=eigen._tred2_tql2)
    assert compiled[0].tobytes() == interpreted[0].tobytes() and compiled[1].tobytes() == interpreted[1].tobytes()


def test_a_matrix_has_the_same_bits_alone_or_in_a_batch():
    a = gram_batch(2, 8, 7, 10)
    batch = eigen.eigh(a)
    alone = eigen.eigh(a[3])
    assert batch[0][3].tobytes() == alone[0].tobytes() and batch[1][3].tobytes() == alone[1].tobytes()


def test_special_matrices():
    values, vectors = eigen.eigh(np.zeros((3, 3)))
    assert values.tolist() == [0, 0, 0] and np.array_equal(np.abs(vectors), np.eye(3))
    values, _ = eigen.eigh(np.eye(4) * 2.5)
    assert values.tolist() == [2.5] * 4
    values, vectors = eigen.eigh(np.ones((5, 5)))  # rank one: eigenvalue 5, and 0 four times
    assert abs(values[-1] - 5) <= 8 * 5 * EPS * 5 and np.abs(values[:-1]).max() <= 8 * 5 * EPS * 5
    # ours (the same bits on every machine) against the exact vector: a gap of 5 leaves it ~n eps off, 1e-14 is 9 eps
    np.testing.assert_allclose(np.abs(vectors[:, -1]), np.full(5, 1 / np.sqrt(5)), rtol=1e-14)
    assert eigen.eigh(np.empty((0, 4, 4)))[0].shape == (0, 4)
    upper_ignored = np.array([[2.0, 99.0], [1.0, 2.0]])  # only the lower triangle is read
    assert np.allclose(eigen.eigh(upper_ignored)[0], [1.0, 3.0])  # the upper one would give -97, 101


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="square"):
        eigen.eigh(np.zeros((3, 2)))
    with pytest.raises(ValueError, match="finite"):
        eigen.eigh(np.array([[1.0, np.nan], [np.nan, 1.0]]))
