"""Eigenvalues and eigenvectors of real symmetric matrices with the same bits on every machine (numpy.linalg.eigh's
LAPACK result varies in its last bits with the BLAS kernel underneath it).

The algorithm is EISPACK's tred2 + tql2, as JAMA publishes it (public domain): Householder reduction to tridiagonal
form, then the implicit QL method with Wilkinson shifts. It is written with scalar IEEE operations only (+, -, *,
/, sqrt, comparisons) in a fixed order, and compiled by numba without fast-math, which keeps every operation as
written (no fused multiply-add, no reordering). Without numba the same function runs interpreted, slowly, with
the same bits (tests/test_eigen.py compares the two).
"""

from __future__ import annotations

import math

import numpy as np


def _hypot(a: float, b: float) -> float:
    """sqrt(a^2 + b^2) without under/overflow (JAMA's Maths.hypot)."""
    if abs(a) > abs(b):
        r = b / a
        return abs(a) * math.sqrt(1.0 + r * r)
    if b != 0.0:
        r = a / b
        return abs(b) * math.sqrt(1.0 + r * r)
    return 0.0


def _tred2_tql2(matrices, values, vectors, scratch):  # pragma: no cover - compiled by numba (or run interpreted)
    """For each symmetric (n, n) matrices[b]: values[b] (n,) ascending and vectors[b] (n, n) with the eigenvectors as
    rows (JAMA's V transposed: its rotations update contiguous rows; measured in
    docs/benchmarks-measurements.md#the-numerical-core); scratch (n,) holds the off-diagonal. Only the lower triangle
    of each matrix is read. Returns the number of matrices whose QL iteration did not converge within 30 n steps
    (their rows are left as reached).

    Longer than 60 lines because it is one compiled kernel (EISPACK's tred2 and tql2 in sequence on shared scratch
    arrays): helpers would be calls inside its innermost loops."""
    count, n = matrices.shape[0], matrices.shape[1]
    eps = 2.0**-52
    failed = 0
    for b in range(count):
        V = vectors[b]
        d = values[b]
        e = scratch
        for i in range(n):
            for j in range(n):
                V[i, j] = matrices[b, i, j] if i >= j else matrices[b, j, i]
        # tred2: Householder reduction to tridiagonal form
        for j in range(n):
            d[j] = V[j, n - 1]
            e[j] = 0.0
        for i in range(n - 1, 0, -1):
            scale = 0.0
            h = 0.0
            for k in range(i):
                scale = scale + abs(d[k])
            if scale == 0.0:
                e[i] = d[i - 1]
                for j in range(i):
                    d[j] = V[j, i - 1]
                    V[j, i] = 0.0
                    V[i, j] = 0.0
            else:
                for k in range(i):
                    d[k] = d[k] / scale
                    h = h + d[k] * d[k]
                f = d[i - 1]
                g = math.sqrt(h)
                if f > 0:
                    g = -g
                e[i] = scale * g
                h = h - f * g
                d[i - 1] = f - g
                for j in range(i):
                    e[j] = 0.0
                for j in range(i):
                    f = d[j]
                    V[i, j] = f
                    g = e[j] + V[j, j] * f
                    for k in range(j + 1, i):
                        g = g + V[j, k] * d[k]
                        e[k] = e[k] + V[j, k] * f
                    e[j] = g
                f = 0.0
                for j in range(i):
                    e[j] = e[j] / h
                    f = f + e[j] * d[j]
                hh = f / (h + h)
                for j in range(i):
                    e[j] = e[j] - hh * d[j]
                for j in range(i):
                    f = d[j]
                    g = e[j]
                    for k in range(j, i):
                        V[j, k] = V[j, k] - (f * e[k] + g * d[k])
                    d[j] = V[j, i - 1]
                    V[j, i] = 0.0
            d[i] = h
        for i in range(n - 1):
            V[i, n - 1] = V[i, i]
            V[i, i] = 1.0
            h = d[i + 1]
            if h != 0.0:
                for k in range(i + 1):
                    d[k] = V[i + 1, k] / h
                for j in range(i + 1):
                    g = 0.0
                    for k in range(i + 1):
                        g = g + V[i + 1, k] * V[j, k]
                    for k in range(i + 1):
                        V[j, k] = V[j, k] - g * d[k]
            for k in range(i + 1):
                V[i + 1, k] = 0.0
        for j in range(n):
            d[j] = V[j, n - 1]
            V[j, n - 1] = 0.0
        V[n - 1, n - 1] = 1.0
        e[0] = 0.0
        # tql2: implicit QL iterations on the tridiagonal matrix
        for i in range(1, n):
            e[i - 1] = e[i]
        e[n - 1] = 0.0
        f = 0.0
        tst1 = 0.0
        steps = 0
        for l in range(n):  # noqa: E741 - EISPACK's name
            tst1 = max(tst1, abs(d[l]) + abs(e[l]))
            m = l
            while m < n - 1:
                if abs(e[m]) <= eps * tst1:
                    break
                m += 1
            if m > l:
                while True:
                    steps += 1
                    g = d[l]
                    p = (d[l + 1] - g) / (2.0 * e[l])
                    r = _hypot(p, 1.0)
                    if p < 0:
                        r = -r
                    d[l] = e[l] / (p + r)
                    d[l + 1] = e[l] * (p + r)
                    dl1 = d[l + 1]
                    h = g - d[l]
                    for i in range(l + 2, n):
                        d[i] = d[i] - h
                    f = f + h
                    p = d[m]
                    c = 1.0
                    c2 = c
                    c3 = c
                    el1 = e[l + 1]
                    s = 0.0
                    s2 = 0.0
                    for i in range(m - 1, l - 1, -1):
                        c3 = c2
                        c2 = c
                        s2 = s
                        g = c * e[i]
                        h = c * p
                        r = _hypot(p, e[i])
                        e[i + 1] = s * r
                        s = e[i] / r
                        c = p / r
                        p = c * d[i] - s * g
                        d[i + 1] = h + s * (c * g + s * d[i])
                        for k in range(n):
                            h = V[i + 1, k]
                            V[i + 1, k] = s * V[i, k] + c * h
                            V[i, k] = c * V[i, k] - s * h
                    p = -s * s2 * c3 * el1 * e[l] / dl1
                    e[l] = s * p
                    d[l] = c * p
                    if not abs(e[l]) > eps * tst1 or steps > 30 * n:
                        break
            d[l] = d[l] + f
            e[l] = 0.0
        if steps > 30 * n:
            failed += 1
        # ascending order (selection sort: stable for ties, as the eigenvalues came)
        for i in range(n - 1):
            k = i
            p = d[i]
            for j in range(i + 1, n):
                if d[j] < p:
                    k = j
                    p = d[j]
            if k != i:
                d[k] = d[i]
                d[i] = p
                for j in range(n):
                    p = V[i, j]
                    V[i, j] = V[k, j]
                    V[k, j] = p
    return failed


_compiled = None
# Below this much work (matrices x n^3) in a process, the interpreted kernel finishes before numba is even imported
# (docs/benchmarks-measurements.md#imports-avoided): a default run's sweep and panels stay below it, while a multirun's
# jobs, one process, compile once their work adds up past it. The bits are the same either way.
INTERPRETED_WORK = 300_000
# The work (matrices x n^3) a caller hands the eigensolver at once: beyond it, a long sentence's weightings go in
# parts, each a progress step (a matrix's eigenvectors are its own: the same bits in parts or at once)
PROJECTION_WORK = 2 * 10**9
_interpreted = 0  # the work this process has run interpreted


def _kernel():
    """The compiled kernel (numba, cached on disk), or the same function interpreted without numba."""
    global _compiled
    if _compiled is None:
        try:
            from numba import njit
        except ImportError:  # numba is a dependency; the interpreted kernel gives the same bits, slowly
            _compiled = _tred2_tql2
        else:
            global _hypot
            _hypot = njit(cache=True)(_hypot)
            _compiled = njit(cache=True, nogil=True)(_tred2_tql2)
    return _compiled


def eigh(matrices, kernel=None) -> tuple[np.ndarray, np.ndarray]:
    """numpy.linalg.eigh of symmetric (..., n, n) float64 matrices (the lower triangle is read): eigenvalues (..., n)
    ascending and eigenvectors (..., n, n) as columns (a transposed view of the kernel's rows), the same bits on every
    machine. Signs of eigenvectors are the algorithm's (normalise them where it matters, as scikit-learn's svd_flip
    does). kernel: the function to run (default: interpreted until this process's work passes INTERPRETED_WORK, then
    compiled; tests pass either)."""
    a = np.ascontiguousarray(matrices, dtype=np.float64)
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ValueError(f"eigh needs square (..., n, n) matrices, got shape {a.shape}")
    if not np.isfinite(a).all():
        raise ValueError("eigh needs finite matrices")
    n = a.shape[-1]
    flat = a.reshape(-1, n, n)
    values, vectors = np.empty(flat.shape[:2]), np.empty(flat.shape)
    if n and len(flat):
        if kernel is None:
            global _interpreted
            _interpreted += len(flat) * n**3
            kernel = _tred2_tql2 if _compiled is None and _interpreted <= INTERPRETED_WORK else _kernel()
        failed = kernel(flat, values, vectors, np.empty(n))
        if failed:
            raise ArithmeticError(f"eigh: the QL iteration did not converge for {failed} matrices")
    return values.reshape(a.shape[:-1]), vectors.reshape(a.shape).swapaxes(-1, -2)
