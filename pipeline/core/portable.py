"""Arithmetic whose results have the same bits on every machine: the building blocks of every number the pipeline
writes.

Why. A value in a tracked file must not depend on the CPU, its SIMD level, the BLAS kernel, libm's variant or the
thread count, yet all of these move last bits: numpy picks SIMD kernels of exp, log and power by CPU feature, glibc
picks an FMA variant of sin and cos, BLAS and torch reductions sum in an order set by the kernel and the threads,
LAPACK iterates on top of them. Rounding results to fewer digits does not make files stable: a one-ulp difference
still crosses a rounding boundary with probability ~ 2^-52 / 10^-digits per value.

How. Everything here is made of IEEE-754 basic operations (+, -, *, /, sqrt, rounding to an integer, comparisons,
exact scaling by a power of two), each one numpy or torch call that rounds once, correctly, on any CPU or GPU; no
multiply-add is fused, nothing is summed in an order the hardware chooses. A fixed sequence of such operations gives
the same bits everywhere:

    sin_cos, exp, log     elementwise, numpy arrays or torch tensors (any device), float64, within ~1 ulp
                          (fdlibm's kernels, Cody-Waite argument reduction)
    tree_sum              a sum in a fixed binary tree (numpy or torch, CPU or GPU alike)
    exact_matmul          matrix products through BLAS on operands split so that every product and partial sum is
                          exact: no summation order can change a bit (Ozaki's error-free splitting)
    exact_band            the band x[p] . x[p+k] of a Gram matrix, each entry exact_matmul's
    standard_normal       Gaussian draws from a seeded PCG64 stream (integer arithmetic) by Box-Muller
    cr_pow, cr_log, cr_log10
                          scalars correctly rounded from 50-digit decimal arithmetic (Python's decimal module: integer
                          arithmetic), for the few constants a computation starts from (frequencies, slopes, grids)
    logspace, geomspace   numpy's, from cr_pow

numpy's own `sum`/`mean` along an axis are portable too (pairwise summation in plain C whose order no CPU dispatch
changes; tests/test_machine_independence.py shows it under every switch), so numpy-only code keeps them;
tree_sum is for torch, whose reductions vectorise by CPU capability and thread count.
"""

from __future__ import annotations

import functools
import math
import operator
from contextlib import nullcontext
from decimal import Context, Decimal
from typing import Any

import numpy as np

# ---------------------------------------------------------------- numpy or torch, the same operations


class _Numpy:
    def float64(self, x):
        return np.asarray(x, dtype=np.float64)

    def sqrt(self, x):
        return np.sqrt(x)

    def floor(self, x):
        return np.floor(x)

    def where(self, condition, a, b):
        return np.where(condition, a, b)

    def frexp(self, x):
        return np.frexp(x)

    def pow2(self, e):
        """2.0 ** e for integer-valued e in -1022..1023, exactly (the bits of the double built directly)."""
        return ((np.asarray(e).astype(np.int64) + 1023) << 52).view(np.float64)

    def cat(self, parts):
        return np.concatenate(parts, axis=-1)

    def zeros(self, shape, like):
        return np.zeros(shape, dtype=np.float64)

    def moveaxis(self, x, source, destination):
        return np.moveaxis(x, source, destination)

    def max_abs_last(self, x):
        return np.max(np.abs(x), axis=-1, keepdims=True) if x.shape[-1] else np.zeros(x.shape[:-1] + (1,))

    def as_strided(self, x, shape, strides):  # strides in elements, as torch's
        return np.lib.stride_tricks.as_strided(x, shape, [s * x.itemsize for s in strides])

    def errstate(self):
        return np.errstate(all="ignore")


class _Torch:
    def __init__(self) -> None:
        import torch

        self.torch = torch

    def float64(self, x):
        return x.to(self.torch.float64)

    def sqrt(self, x):
        return self.torch.sqrt(x)

    def floor(self, x):
        return self.torch.floor(x)

    def where(self, condition, a, b):
        return self.torch.where(condition, a, b)

    def frexp(self, x):
        return self.torch.frexp(x)

    def pow2(self, e):
        return ((e.to(self.torch.int64) + 1023) << 52).view(self.torch.float64)

    def cat(self, parts):
        return self.torch.cat(parts, dim=-1)

    def zeros(self, shape, like):
        return self.torch.zeros(shape, dtype=self.torch.float64, device=like.device)

    def moveaxis(self, x, source, destination):
        return self.torch.movedim(x, source, destination)

    def max_abs_last(self, x):
        return x.abs().amax(dim=-1, keepdim=True) if x.shape[-1] else x.new_zeros(x.shape[:-1] + (1,))

    def as_strided(self, x, shape, strides):
        return x.as_strided(shape, strides)

    def errstate(self):
        return nullcontext()


_NUMPY = _Numpy()
_TORCH: _Torch | None = None


def _ops(x: Any):
    """The operations of x's library: torch for a tensor (imported only then), numpy for anything else."""
    global _TORCH
    if type(x).__module__.startswith("torch"):
        if _TORCH is None:
            _TORCH = _Torch()
        return _TORCH
    return _NUMPY


def _is_cpu_tensor(x: Any) -> bool:
    return type(x).__module__.startswith("torch") and x.device.type == "cpu"


def numpy_on_cpu(function):
    """Run `function` on numpy views of CPU tensors and hand tensors back: the same IEEE operations, so the same bits,
    without torch's per-operation overhead and thread start-up, which dominate these short elementwise chains on the
    CPU (docs/benchmarks-measurements.md#files-and-parsing); tensors on a GPU stay there."""

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        if not any(_is_cpu_tensor(a) for a in args):
            return function(*args, **kwargs)
        import torch

        result = function(*(a.detach().numpy() if _is_cpu_tensor(a) else a for a in args), **kwargs)
        if isinstance(result, tuple):
            return tuple(torch.from_numpy(np.asarray(r)) for r in result)
        return torch.from_numpy(np.asarray(result))

    return wrapper


# ---------------------------------------------------------------- sin and cos

# pi/2 in four pieces, the first three of 26 significant bits: k * piece is exact for |k| < 2^27
_PIO2 = (
    float.fromhex("0x1.921fb50000000p+0"),
    float.fromhex("0x1.110b460000000p-26"),
    float.fromhex("0x1.1a62630000000p-54"),
    float.fromhex("0x1.8a2e03707344ap-81"),
)
_TWO_OVER_PI = float.fromhex("0x1.45f306dc9c883p-1")
# |x| up to 2^26 rad keeps k = rint(2x/pi) below 2^26, so every k * piece is exact
MAX_ANGLE = 2.0**26
# fdlibm's __kernel_sin and __kernel_cos (FreeBSD msun k_sin.c, k_cos.c): errors below one ulp on [-pi/4, pi/4]
_S1, _S2, _S3 = -1.66666666666666324348e-01, 8.33333333332248946124e-03, -1.98412698298579493134e-04
_S4, _S5, _S6 = 2.75573137070700676789e-06, -2.50507602534068634195e-08, 1.58969099521155010221e-10
_C1, _C2, _C3 = 4.16666666666666019037e-02, -1.38888888888741095749e-03, 2.48015872894767294178e-05
_C4, _C5, _C6 = -2.75573143513906633035e-07, 2.08757232129817482790e-09, -1.13596475577881948265e-11


@numpy_on_cpu
def sin_cos(x):
    """(sin x, cos x), float64, of a numpy array or torch tensor of angles |x| <= MAX_ANGLE (radians), within about
    one ulp; nan stays nan. The same bits on every CPU and GPU.

    x = k pi/2 + (hi + lo): k rounded from x 2/pi, the reduced angle from four pieces of pi/2 (the first product
    cancels exactly), then fdlibm's polynomials with the tail lo, and the quadrant k mod 4 picks the signs.
    """
    ops = _ops(x)
    x = ops.float64(x)
    if bool((abs(x) > MAX_ANGLE).any()):
        raise ValueError(f"sin_cos: angles beyond {MAX_ANGLE:.0f} rad lose the exact argument reduction")
    with ops.errstate():
        k = (x * _TWO_OVER_PI).round()  # to nearest, half to even (numpy's rint)
        r = (x - k * _PIO2[0]) - k * _PIO2[1]
        t = k * _PIO2[2]
        hi = r - t
        lo = ((r - hi) - t) - k * _PIO2[3]
        z = hi * hi
        w = z * z
        v = z * hi
        rs = (_S2 + z * (_S3 + z * _S4)) + (z * w) * (_S5 + z * _S6)
        sin = hi - (((z * (0.5 * lo - v * rs)) - lo) - v * _S1)
        rc = z * (_C1 + z * (_C2 + z * _C3)) + (w * w) * (_C4 + z * (_C5 + z * _C6))
        hz = 0.5 * z
        one_minus = 1.0 - hz
        cos = one_minus + (((1.0 - one_minus) - hz) + (z * rc - hi * lo))
        quadrant = k - 4.0 * ops.floor(k * 0.25)  # 0, 1, 2, 3 (exact)
    sin_x = ops.where(quadrant == 0, sin, ops.where(quadrant == 1, cos, ops.where(quadrant == 2, -sin, -cos)))
    cos_x = ops.where(quadrant == 0, cos, ops.where(quadrant == 1, -sin, ops.where(quadrant == 2, -cos, sin)))
    return sin_x, cos_x


# ---------------------------------------------------------------- exp and log (fdlibm's e_exp.c, e_log.c)

_LN2_HI, _LN2_LO = 6.93147180369123816490e-01, 1.90821492927058770002e-10  # ln 2 = hi + lo, hi of 32 bits
_INV_LN2 = 1.44269504088896338700e00
_P1, _P2, _P3 = 1.66666666666666019037e-01, -2.77777777770155933842e-03, 6.61375632143793436117e-05
_P4, _P5 = -1.65339022054652515390e-06, 4.13813679705723846039e-08
_EXP_OVERFLOW, _EXP_UNDERFLOW = 7.09782712893383973096e02, -7.45133219101941108420e02
_LG1, _LG2, _LG3 = 6.666666666666735130e-01, 3.999999999940941908e-01, 2.857142874366239149e-01
_LG4, _LG5, _LG6, _LG7 = (
    2.222219843214978396e-01,
    1.818357216161805012e-01,
    1.531383769920937332e-01,
    1.479819860511658591e-01,
)
_SQRT_HALF = 0.7071067811865476


@numpy_on_cpu
def exp(x):
    """e^x, float64, elementwise on a numpy array or torch tensor, within about one ulp; inf above 709.78, 0 below
    -745.13 (and for -inf). The same bits on every CPU and GPU."""
    ops = _ops(x)
    x = ops.float64(x)
    with ops.errstate():
        inside = (x > _EXP_UNDERFLOW) & (x < _EXP_OVERFLOW)
        safe = ops.where(inside, x, 0.0)
        k = (safe * _INV_LN2).round()  # |k| <= 1075: k * _LN2_HI is exact
        hi = safe - k * _LN2_HI
        lo = k * _LN2_LO
        r = hi - lo
        t = r * r
        c = r - t * (_P1 + t * (_P2 + t * (_P3 + t * (_P4 + t * _P5))))
        y = 1.0 - ((lo - (r * c) / (2.0 - c)) - hi)
        half = ops.floor(k * 0.5)
        scaled = (y * ops.pow2(half)) * ops.pow2(k - half)  # two exact powers of two: one rounding, if subnormal
        out = ops.where(inside, scaled, ops.where(x >= _EXP_OVERFLOW, math.inf, 0.0))
    return ops.where(x != x, x, out)  # nan stays nan


@numpy_on_cpu
def log(x):
    """ln x, float64, elementwise on a numpy array or torch tensor, within about one ulp; -inf at 0, nan below 0,
    inf at inf. The same bits on every CPU and GPU."""
    ops = _ops(x)
    x = ops.float64(x)
    with ops.errstate():
        positive = (x > 0) & (x < math.inf)
        mantissa, exponent = ops.frexp(ops.where(positive, x, 1.0))  # x = m 2^e, 0.5 <= m < 1
        low = mantissa < _SQRT_HALF
        m = ops.where(low, mantissa * 2.0, mantissa)  # sqrt(1/2) <= m < sqrt(2)
        k = ops.float64(exponent) - ops.float64(low)
        f = m - 1.0
        s = f / (2.0 + f)
        z = s * s
        w = z * z
        r = z * (_LG1 + w * (_LG3 + w * (_LG5 + w * _LG7))) + w * (_LG2 + w * (_LG4 + w * _LG6))
        hfsq = 0.5 * f * f
        out = k * _LN2_HI - ((hfsq - (s * (hfsq + r) + k * _LN2_LO)) - f)
        out = ops.where(positive, out, ops.where(x == 0, -math.inf, ops.where(x == math.inf, math.inf, math.nan)))
    return out


# ---------------------------------------------------------------- sums and products


@numpy_on_cpu
def tree_sum(x, axis: int = -1):
    """The sum over `axis` of a numpy array or torch tensor, added in a fixed binary tree: x[i] + x[i + n//2] (an odd
    last entry carried over), then the same on that half, until one is left. The order depends on the length only,
    so the same bits on every device, kernel and thread count."""
    ops = _ops(x)
    x = ops.moveaxis(x, axis, -1)
    n = x.shape[-1]
    if n == 0:
        return ops.zeros(x.shape[:-1], like=x)
    while n > 1:
        half = n // 2
        top = x[..., :half] + x[..., half : 2 * half]
        x = ops.cat([top, x[..., 2 * half :]]) if n % 2 else top
        n = x.shape[-1]
    return x[..., 0]


def _split(x, ops, bits: int, slices: int) -> tuple[list, Any, Any]:
    """Rows of x (..., r, k) as `slices` parts, an exponent per row and the rest: x = (sum(parts) + rest) * 2^e, the
    rest below 2^-(bits * slices) of the row's largest magnitude (dropped). Part s holds integers of at most `bits`
    bits times 2^-(bits (s + 1)) (the rows scaled by 2^-e to a largest magnitude in [0.5, 1)); made by adding and
    subtracting 1.5 * 2^(52 - bits (s + 1)), which rounds to that grid exactly. The parts do not depend on `slices`."""
    _, e = ops.frexp(ops.max_abs_last(x))
    e = e.clip(-1021, 1021)  # beyond, 2^-e is not a normal double (magnitudes near the float64 limits)
    rest = x * ops.pow2(-e)
    parts = []
    for s in range(slices):
        sigma = 1.5 * 2.0 ** (52 - bits * (s + 1))
        part = rest + sigma
        part -= sigma
        parts.append(part)
        rest -= part
    return parts, e, rest


def _split_size(k: int) -> tuple[int, int]:
    """(bits, slices) of the parts for sums of k products: k 2^(2 bits + 2) <= 2^53; the products cover 62 bits."""
    bits = min(26, (51 - max(1, (max(k, 2) - 1).bit_length())) // 2)  # (k - 1).bit_length() = ceil(log2 k)
    return bits, -(-62 // bits)


def _sum_products(a_parts: list, b_parts: list, product) -> Any:
    """The sum of product(a_parts[s], b_parts[t]) over s + t < slices, each exact, added smallest first in a fixed
    order; a part given as None is zero in every row (its products are skipped: exact zeros)."""
    total = None
    for order in range(len(a_parts) - 1, -1, -1):
        for s in range(order + 1):
            if a_parts[s] is not None and b_parts[order - s] is not None:
                part = product(a_parts[s], b_parts[order - s])
                total = part if total is None else total + part
    return total


@numpy_on_cpu
def exact_matmul(a, b):
    """a @ b for numpy arrays or torch tensors a (..., n, k), b (..., k, m), float64, the same bits whatever the BLAS
    kernel, its threads or the device.

    Ozaki's error-free splitting: each row of a and each column of b is split into parts of `bits` bits at a common
    exponent, with k 2^(2 bits + 2) <= 2^53, so each product of two parts is an exact sum: every term is an integer
    multiple of one unit and so is every partial sum, whatever order BLAS adds them in (with or without fused
    multiply-adds). The partial products are then added in a fixed order, smallest first. Accuracy: within a few
    ulp of the exact product, and absolute errors below 2^-60 of |a_i| |b_j| (finer than a float64 matmul).
    Costs slices (slices + 1) / 2 matrix products: 6 for k up to 512, 10 up to 4,096."""
    ops = _ops(a)
    a, b = ops.float64(a), ops.float64(b)
    bits, slices = _split_size(a.shape[-1])
    with ops.errstate():
        a_parts, a_exp, _ = _split(a, ops, bits, slices)
        b_parts, b_exp, _ = _split(b.swapaxes(-1, -2), ops, bits, slices)
        total = _sum_products(a_parts, [p.swapaxes(-1, -2) for p in b_parts], operator.matmul)
        return (total * ops.pow2(a_exp)) * ops.pow2(b_exp).swapaxes(-1, -2)


@numpy_on_cpu
def exact_band(x, width: int, chunk_elems: int):
    """(n, width) band of x x^T for a numpy array or torch tensor x (n, d): band[p, k] = x[p] . x[p+k], 0 where
    p + k >= n; float64, each entry the bits exact_matmul gives it, on any device.

    Rows split once per chunk of about chunk_elems entries; blocks of 8 rows times their 7 + width neighbours (views)
    in one batched product per pair of parts. Rows that need two parts (float32 rows without a value 2^16 times below
    their largest) take 4 products, not up to 10 (the rest add exact zeros); the other rows' entries come from
    exact_matmul of two rows, unless over 1/16 of the chunk (docs/benchmarks-measurements.md#the-numerical-core)."""
    ops, B = _ops(x), 8
    (n, d), K = x.shape, width - 1
    bits, slices = _split_size(d)
    band = ops.zeros((n, width), like=x)
    step = max(B, chunk_elems // max(d, 1) // B * B)
    for c0 in range(0, n, step):
        r = min(step, n - c0)
        nb = -(-r // B)
        chunk = ops.zeros((nb * B + K, d), like=x)
        chunk[: min(n - c0, nb * B + K)] = x[c0 : c0 + nb * B + K]  # float64; zero rows past the end
        with ops.errstate():
            parts, e, rest = _split(chunk, ops, bits, 2)
            deep = (rest != 0).any(-1)  # the rows that may need more than two parts
            few = int(deep.sum()) * 16 <= len(deep)
            used = parts + [None] * (slices - 2) if few else _split(chunk, ops, bits, slices)[0]
            gram = _sum_products(
                [None if p is None else ops.as_strided(p, (nb, B, d), (B * d, d, 1)) for p in used],
                [None if p is None else ops.as_strided(p, (nb, d, B + K), (B * d, 1, d)) for p in used],
                operator.matmul,
            )  # (nb, B, B + K): rows against their neighbours
            gram = ops.as_strided(gram, (nb, B, width), (B * (B + K), B + K + 1, 1)).reshape(nb * B, width)
            scale = ops.pow2(e[:, 0])
            band[c0 : c0 + r] = (gram[:r] * scale[:r, None]) * ops.as_strided(scale, (r, width), (1, 1))
            if few and bool(deep.any()):
                near = deep[:r, None] | ops.as_strided(deep, (r, width), (1, 1))  # entries with a deep row
                a, b = (ops.as_strided(chunk, (r, width, d), (d, at, 1))[near] for at in (0, d))
                band[c0 : c0 + r][near] = exact_matmul(a[:, None], b[:, :, None])[:, 0, 0]
    return band


# ---------------------------------------------------------------- random draws


@numpy_on_cpu
def box_muller(u1, u2):
    """N(0, 1) draws from uniform draws u1, u2 in [0, 1) of one shape (numpy or torch): (z1, z2), each of that shape,
    z1 = r cos(2 pi u2), z2 = r sin(2 pi u2), r = sqrt(-2 ln(1 - u1)), with this module's log and sin_cos."""
    radius = _ops(u1).sqrt(-2.0 * log(1.0 - u1))  # 1 - u1 in (0, 1]
    sin, cos = sin_cos(u2 * (2.0 * math.pi))
    return radius * cos, radius * sin


def standard_normal(seed: Any, shape: tuple[int, ...]) -> np.ndarray:
    """N(0, 1) float64 draws of `shape` from numpy's PCG64 seeded `seed` (an int or a sequence of ints): its uniform
    doubles (integer arithmetic: the same stream everywhere) through box_muller, draws 2i and 2i + 1 from the i-th
    pair of uniforms. The same values on every machine."""
    count = int(np.prod(shape, dtype=np.int64))
    u = np.random.default_rng(seed).random(((count + 1) // 2, 2))
    z1, z2 = box_muller(u[:, 0], u[:, 1])
    return np.stack([z1, z2], axis=1).reshape(-1)[:count].reshape(shape)


# ---------------------------------------------------------------- scalars, correctly rounded

_DECIMAL = Context(prec=50)  # float(a Decimal) is the nearest double: correctly rounded


def cr_pow(base: float, exponent: float) -> float:
    """base ** exponent for base > 0, rounded from 50 significant digits: the correctly rounded double (short of
    a tie closer than 1e-34), on every machine."""
    if not base > 0:
        raise ValueError(f"cr_pow needs a base > 0, got {base!r}")
    if exponent == 0:
        return 1.0
    return float(_DECIMAL.power(Decimal(float(base)), Decimal(float(exponent))))


def cr_log(x: float) -> float:
    """ln x (x > 0), correctly rounded (see cr_pow)."""
    if not x > 0:
        raise ValueError(f"cr_log needs x > 0, got {x!r}")
    return float(_DECIMAL.ln(Decimal(float(x))))


def cr_log10(x: float) -> float:
    """log10 x (x > 0), correctly rounded (see cr_pow)."""
    if not x > 0:
        raise ValueError(f"cr_log10 needs x > 0, got {x!r}")
    return float(_DECIMAL.log10(Decimal(float(x))))


def cr_powers(base: float, exponents: Any) -> np.ndarray:
    """(n,) float64 base ** e for each exponent e (see cr_pow)."""
    return np.array([cr_pow(base, float(e)) for e in np.asarray(exponents, dtype=np.float64).reshape(-1)])


def logspace(start: float, stop: float, num: int) -> np.ndarray:
    """(num,) 10 ** linspace(start, stop, num), as numpy.logspace, each power correctly rounded (cr_pow)."""
    exponents = np.linspace(start, stop, num)
    return np.array([cr_pow(10.0, float(e)) for e in exponents])


def geomspace(first: float, last: float, num: int) -> np.ndarray:
    """(num,) a geometric sequence from `first` to `last` (both > 0), as numpy.geomspace: logspace between their
    correctly rounded log10, the two ends exact."""
    out = logspace(cr_log10(first), cr_log10(last), num)
    if num:
        out[0], out[-1] = first, last
    return out
