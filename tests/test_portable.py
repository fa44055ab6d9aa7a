"""pipeline.core.portable: each function against an independent reference (mpmath at 120 bits, exact rational
arithmetic, numpy) and the property it exists for: numpy and torch give the same bits, and no summation order can
change an exact product."""

from __future__ import annotations

import math
import subprocess
import sys
from fractions import Fraction

import mpmath
import numpy as np
import pytest
import torch

from conftest import REPO
from pipeline.core import portable as pt
from pipeline.core import sinusoid

mpmath.mp.prec = 120
EPS = np.finfo(np.float64).eps


def ulps(values: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """|values - reference| in units of the reference's last place."""
    return np.abs(values - reference) / np.spacing(np.abs(reference))


def bits(x) -> bytes:
    return np.ascontiguousarray(x.numpy() if isinstance(x, torch.Tensor) else x).tobytes()


ANGLES = np.concatenate(
    [
        np.random.default_rng(0).uniform(-10, 10, 2000),
        np.random.default_rng(1).uniform(0, 1e7, 2000),  # positions up to 10 million times w_0 = 1
        np.arange(1, 400) * (math.pi / 4),  # near multiples of pi/4: the argument reduction's hardest cases
        [0.0, 1e-300, 5e-324, 2.0**-30, pt.MAX_ANGLE],
    ]
)


def test_sin_cos_are_within_one_ulp_of_mpmath():
    """fdlibm's kernels are accurate to below one ulp on [-pi/4, pi/4], and the reduction by pi/2 in pieces of 26
    bits (k * piece exact for |k| < 2^27) adds no more: the results are within one ulp of the exact value, and within
    2^-53 absolutely where the value is tiny (near a zero of sin or cos an ulp of the result is smaller than the
    reduction's absolute error, which any float64 implementation shares)."""
    sin, cos = pt.sin_cos(ANGLES)
    for got, f in ((sin, mpmath.sin), (cos, mpmath.cos)):
        exact = np.array([float(f(mpmath.mpf(x))) for x in ANGLES])
        large = np.abs(exact) > 1e-3
        assert ulps(got[large], exact[large]).max() <= 1.0
        assert np.abs(got - exact).max() <= 2.0**-53


def test_exp_and_log_are_within_one_ulp_of_mpmath_and_keep_special_values():
    """fdlibm's e_exp.c and e_log.c claim errors below one ulp; measured here against mpmath."""
    rng = np.random.default_rng(2)
    x = np.concatenate([rng.uniform(-745, 709.7, 4000), [0.0, 1e-20, -1e-20, 709.78, -745.1]])
    exact = np.array([float(mpmath.exp(mpmath.mpf(v))) for v in x])
    normal = exact > np.finfo(np.float64).tiny
    assert ulps(pt.exp(x)[normal], exact[normal]).max() <= 1.0
    y = np.exp(rng.uniform(-700, 700, 4000))
    exact_log = np.array([float(mpmath.log(mpmath.mpf(v))) for v in y])
    assert ulps(pt.log(y), exact_log).max() <= 1.0
    special = np.array([0.0, -1.0, np.inf, np.nan, -np.inf, 1.0])
    np.testing.assert_array_equal(pt.log(special), [-np.inf, np.nan, np.inf, np.nan, np.nan, 0.0])
    np.testing.assert_array_equal(
        pt.exp(np.array([-np.inf, np.inf, np.nan, 0.0, 710.0, -746.0])), [0, np.inf, np.nan, 1, np.inf, 0]
    )


def test_numpy_and_torch_give_the_same_bits():
    """The same IEEE operations in the same order: the bits cannot differ (and, on a GPU, neither can CUDA's)."""
    rng = np.random.default_rng(3)
    x = rng.uniform(-1000, 1000, 5000)
    for f in (lambda v: pt.sin_cos(v)[0], lambda v: pt.sin_cos(v)[1], pt.exp, lambda v: pt.log(abs(v))):
        assert bits(f(x)) == bits(f(torch.from_numpy(x)))
    a, b = rng.normal(size=(30, 70)), rng.normal(size=(70, 20))
    assert bits(pt.exact_matmul(a, b)) == bits(pt.exact_matmul(torch.from_numpy(a), torch.from_numpy(b)))
    assert bits(pt.tree_sum(a)) == bits(pt.tree_sum(torch.from_numpy(a)))


@pytest.mark.parametrize("k", [1, 3, 50, 300, 1000, 3000])
def test_exact_matmul_is_the_rounded_exact_product(k):
    """Each entry within one ulp of the exact dot product (rational arithmetic): the partial products are exact,
    only their final sum rounds (3 to 10 of them, smallest first); a float64 BLAS product is not (its error grows
    with k and with cancellation)."""
    rng = np.random.default_rng(k)
    a = rng.normal(size=(6, k)) * np.exp(rng.uniform(-20, 20, size=(6, 1)))
    b = rng.normal(size=(k, 5))
    got = pt.exact_matmul(a, b)
    exact = np.array(
        [[float(sum(Fraction(x) * Fraction(y) for x, y in zip(a[i], b[:, j]))) for j in range(5)] for i in range(6)]
    )
    assert ulps(got, exact).max() <= 1.0


def test_exact_matmul_does_not_depend_on_the_order_of_the_sum():
    """Permuting the summed index changes BLAS's order of additions; every partial sum is exact, so no bit moves."""
    rng = np.random.default_rng(4)
    a, b = rng.normal(size=(40, 300)), rng.normal(size=(300, 30))
    order = rng.permutation(300)
    assert bits(pt.exact_matmul(a, b)) == bits(pt.exact_matmul(a[:, order], b[order]))
    batched = pt.exact_matmul(np.stack([a, a[::-1]]), np.stack([b, b]))
    assert bits(batched[0]) == bits(pt.exact_matmul(a, b)) and bits(batched[1]) == bits(pt.exact_matmul(a[::-1], b))


def test_exact_matmul_gives_the_same_bits_on_other_blas_kernels():
    """OpenBLAS picks its kernel by CPU (OPENBLAS_CORETYPE makes this one run another's): a float64 matmul's bits
    change with it, exact_matmul's do not."""
    script = (
        "import numpy as np, hashlib\nfrom pipeline.core.portable import exact_matmul\n"
        "r = np.random.default_rng(5); a, b = r.normal(size=(64, 500)), r.normal(size=(500, 64))\n"
        "print(hashlib.sha256(exact_matmul(a, b).tobytes()).hexdigest())"
    )

    def digest(**env: str) -> str:
        import os

        result = subprocess.run(
            [sys.executable, "-c", script], cwd=REPO, env={**os.environ, **env}, capture_output=True, text=True
        )
        assert result.returncode == 0, result.stderr
        return result.stdout.strip()

    native = digest()
    assert digest(OPENBLAS_CORETYPE="Prescott") == native
    assert digest(OPENBLAS_NUM_THREADS="1") == native


def test_tree_sum_adds_in_a_fixed_tree_within_the_pairwise_bound():
    """The sum of n values in a binary tree: within ceil(log2 n) eps sum|x| of the exact sum (math.fsum)."""
    rng = np.random.default_rng(6)
    for n in (0, 1, 2, 7, 100, 1001):
        x = rng.normal(size=(3, n))
        got = pt.tree_sum(x)
        for row, value in zip(x, got):
            bound = max(1, math.ceil(math.log2(max(n, 1)))) * EPS * np.abs(row).sum()
            assert abs(value - math.fsum(row)) <= bound
    # (x0 + x2) + (x1 + x3): the tree's order, not left to right (which gives 0 here)
    assert pt.tree_sum(np.array([1.0, 1e100, 1.0, -1e100])) == 2.0


def test_standard_normal_draws_are_gaussian_and_seeded():
    """200,000 draws: mean and standard deviation within 5 standard errors of N(0, 1), the fourth moment near 3;
    the same seed gives the same bits, another seed other draws."""
    z = pt.standard_normal(0, (200_000,))
    n = z.size
    assert abs(z.mean()) < 5 / math.sqrt(n) and abs(z.std() - 1) < 5 / math.sqrt(2 * n)
    assert abs((z**4).mean() - 3) < 5 * math.sqrt(96 / n)
    assert bits(pt.standard_normal(0, (7, 3))) == bits(pt.standard_normal(0, (21,)).reshape(7, 3))
    assert not np.array_equal(pt.standard_normal(1, (21,)), pt.standard_normal(0, (21,)))


def test_correctly_rounded_scalars_equal_mpmath_rounded_once():
    rng = np.random.default_rng(7)
    for base, exponent in zip(rng.uniform(0.01, 1e5, 200), rng.uniform(-3, 3, 200)):
        assert pt.cr_pow(base, exponent) == float(mpmath.power(mpmath.mpf(base), mpmath.mpf(exponent)))
    for x in rng.uniform(1e-10, 1e10, 200):
        assert pt.cr_log(x) == float(mpmath.log(mpmath.mpf(x)))
        assert pt.cr_log10(x) == float(mpmath.log10(mpmath.mpf(x)))
    assert pt.cr_pow(10000.0, 0.0) == 1.0 and pt.cr_log10(1000.0) == 3.0
    with pytest.raises(ValueError, match="base > 0"):
        pt.cr_pow(-2.0, 0.5)


def test_logspace_and_geomspace_are_numpys_within_a_few_ulp():
    """Ours are correctly rounded (cr_pow, above); numpy's power is within an ulp or two on each CPU's kernel (SIMD
    or libm): 8 ulp holds on any machine, and any other exponent grid is off by far more. numpy.geomspace starts
    from numpy's log10 of the ends (within an ulp on its kernels), ours from the correctly rounded one: an ulp of
    log10 x moves the grid by ln(10) ulp(log10 x) relative (18 ulp of the result here), so that comparison is
    relative, with room for 4 ulp of log10; between the same ends the ulp comparison holds again."""
    np.testing.assert_array_max_ulp(pt.logspace(-2, 2, 41), np.logspace(-2, 2, 41), maxulp=8)
    grid = pt.geomspace(257, 100_000, 200)
    log_ulp = np.spacing(math.log10(100_000))  # the larger end's
    rtol = math.log(10) * 4 * log_ulp + 8 * EPS
    np.testing.assert_allclose(grid, np.geomspace(257, 100_000, 200), rtol=rtol, atol=0)
    exponents = np.linspace(pt.cr_log10(257), pt.cr_log10(100_000), 200)[1:-1]  # the same ends: ulps again
    np.testing.assert_array_max_ulp(grid[1:-1], np.power(10.0, exponents), maxulp=8)
    assert grid[0] == 257 and grid[-1] == 100_000


def test_a_sinusoid_entry_depends_on_its_position_alone():
    """The same position gives the same bits whichever rows are computed with it (angle addition from fixed
    blocks of ROW_BLOCK positions), in numpy and torch."""
    w = sinusoid.frequencies(50, 1e4)
    whole = sinusoid.sin_cos_rows(0, 1000, w)
    part = sinusoid.sin_cos_rows(300, 517, w)
    assert bits(whole[0][300:817]) == bits(part[0]) and bits(whole[1][300:817]) == bits(part[1])
    torch_part = sinusoid.sin_cos_rows(300, 517, torch.from_numpy(w))
    assert bits(torch_part[0]) == bits(part[0]) and bits(torch_part[1]) == bits(part[1])


def test_sinusoid_frequencies_are_correctly_rounded():
    w = sinusoid.frequencies(128, 10000.0)
    exact = [float(mpmath.power(10000, -mpmath.mpf(2 * i) / 128)) for i in range(64)]
    assert w.tolist() == exact
