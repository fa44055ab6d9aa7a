"""Float64 references of the sinusoidal encoding in numpy, independent of the core's torch code: its rows, the 1-D
profiles of its dot-product and distance matrices (the distances from sums of 4 sin^2(k w / 2), not from the
core's 2m - 2 dot), sampled rows of the full matrices and of their block means."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

CHUNK = 2**22  # float64 elements of a temporary


def frequencies(d: int, base: float) -> np.ndarray:
    """(ceil(d/2),) w_i = base^(-2i/d)."""
    return 1.0 / np.power(float(base), np.arange(0, d, 2, dtype=np.float64) / d)


def pe_rows(positions: np.ndarray, d: int, base: float) -> np.ndarray:
    """(len(positions), d) interleaved encoding: sin(p w_i) in column 2i, cos(p w_i) in column 2i + 1."""
    angle = np.asarray(positions, dtype=np.float64)[:, None] * frequencies(d, base)[None, :]
    out = np.empty((len(positions), d))
    out[:, 0::2] = np.sin(angle)
    out[:, 1::2] = np.cos(angle[:, : d // 2])
    return out


class Profiles(NamedTuple):
    dot: np.ndarray  # (n,) sum over the sin/cos pairs of cos(k w_i)
    dist2: np.ndarray  # (n,) sum over the pairs of 4 sin^2(k w_i / 2)
    unpaired: np.ndarray | None  # (n,) sin(p w_last) for odd d


def profiles(n: int, d: int, base: float) -> Profiles:
    w = frequencies(d, base)
    m = d // 2
    dot, dist2 = np.zeros(n), np.zeros(n)
    step = max(1, CHUNK // max(m, 1))
    for k0 in range(0, n, step):
        angle = np.arange(k0, min(n, k0 + step), dtype=np.float64)[:, None] * w[None, :m]
        dot[k0 : k0 + step] = np.cos(angle).sum(axis=1)
        dist2[k0 : k0 + step] = (4.0 * np.sin(0.5 * angle) ** 2).sum(axis=1)
    unpaired = np.sin(np.arange(n, dtype=np.float64) * w[-1]) if d % 2 else None
    return Profiles(dot, dist2, unpaired)


def matrix_rows(prof: Profiles, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows a of the (n, n) dot-product and distance matrices: two (len(rows), n)."""
    n = prof.dot.size
    k = np.abs(np.asarray(rows)[:, None] - np.arange(n)[None, :])
    dot, dist2 = prof.dot[k], prof.dist2[k]
    u = prof.unpaired
    if u is not None:
        dot = dot + u[rows, None] * u[None, :]
        dist2 = dist2 + (u[rows, None] - u[None, :]) ** 2
    return dot, np.sqrt(dist2)


def block_rows(prof: Profiles, blocks: np.ndarray, f: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows I of the f x f block means (positions 0 .. M f - 1, M = n // f): two (len(blocks), M)."""
    M = prof.dot.size // f
    dots, dists = [], []
    for i in blocks:
        dot, dist = matrix_rows(prof, np.arange(i * f, (i + 1) * f))
        dots.append(dot[:, : M * f].reshape(f, M, f).mean(axis=(0, 2)))
        dists.append(dist[:, : M * f].reshape(f, M, f).mean(axis=(0, 2)))
    return np.stack(dots), np.stack(dists)
