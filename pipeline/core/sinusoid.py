"""The sinusoid's numbers, for numpy arrays and torch tensors alike (no torch import here: the study uses numpy):
its frequencies and its sin/cos tables, with the same bits on every machine and device
(pipeline.core.portable).

    w_i = base^(-2i/d), i = 0 .. ceil(d/2) - 1              each correctly rounded (portable.cr_pow)
    sin(p w_i), cos(p w_i), p = q B + r, 0 <= r < B         angle addition from tables of (q B) w and r w

B = ROW_BLOCK is a constant, so an entry depends on its position p alone, never on which rows are computed with it
or in which chunk: the encoding core (torch, any device), the study (numpy) and a table of any length agree bit for
bit. Angle addition needs (n/B + B) h portable sin/cos evaluations for n x h entries, and four products and two sums
per entry; its error is a few float64 ulp.
"""

from __future__ import annotations

import functools

import numpy as np

from pipeline.core import portable

ROW_BLOCK = 256


def frequencies(d_model: int, base: float) -> np.ndarray:
    """(ceil(d_model / 2),) float64 w_i = base^(-2i/d): the exponent 2i/d in float64, the power correctly rounded."""
    if d_model < 1:
        raise ValueError(f"d_model ({d_model}) must be >= 1")
    return np.array(_frequencies(int(d_model), float(base)))


@functools.lru_cache(maxsize=64)
def _frequencies(d_model: int, base: float) -> tuple[float, ...]:
    """frequencies' values, remembered: a correctly rounded power takes about 60 microseconds in decimal arithmetic,
    and the stages ask for the same few (d, base) many times."""
    return tuple(portable.cr_powers(base, -(np.arange(0, d_model, 2, dtype=np.float64) / d_model)).tolist())


@portable.numpy_on_cpu
def sin_cos_rows(start: int, count: int, w):
    """(sin, cos), each (count, h) float64, of p w_i for positions p = start .. start + count - 1; w: (h,) float64
    frequencies, a numpy array or a torch tensor (the tables are made where w is; CPU tensors through numpy)."""
    if start < 0 or count < 0:
        raise ValueError(f"positions must be >= 0 (start {start}, count {count})")
    B = ROW_BLOCK
    first, last = start // B, (start + max(count, 1) - 1) // B  # the blocks that hold the positions
    sin_q, cos_q = portable.sin_cos((_arange(first, last + 1, w) * float(B))[:, None] * w[None, :])  # (Q, h)
    sin_r, cos_r = portable.sin_cos(_arange(0, B, w)[:, None] * w[None, :])  # (B, h)
    sq, cq, sr, cr = sin_q[:, None, :], cos_q[:, None, :], sin_r[None], cos_r[None]
    rows = slice(start - first * B, start - first * B + count)
    h = w.shape[0]
    sin = (sq * cr + cq * sr).reshape(-1, h)[rows]
    cos = (cq * cr - sq * sr).reshape(-1, h)[rows]
    return sin, cos


def _arange(first: int, stop: int, like):
    """float64 first .. stop - 1 where `like` lives (numpy, or torch on its device)."""
    if type(like).__module__.startswith("torch"):
        import torch

        return torch.arange(first, stop, dtype=torch.float64, device=like.device)
    return np.arange(first, stop, dtype=np.float64)


def table(n: int, d: int, base: float, layout: str, dtype: str) -> np.ndarray:
    """(n, d) float64 holding the sinusoidal encoding of positions 0 .. n-1 rounded once to `dtype` (float32 or
    float64) in `layout` (interleaved: sin, cos alternate; concatenated: [sin | cos]); the encoding core's values
    (pipeline.core.encoding.sinusoidal_encoding), bit for bit, without torch."""
    from pipeline.core.choices import LAYOUTS

    if layout not in LAYOUTS:
        raise ValueError(f"layout {layout!r} is not one of {', '.join(LAYOUTS)}")
    w = frequencies(d, base)
    sin, cos = sin_cos_rows(0, n, w)
    pe = np.empty((n, d), dtype=np.float64)
    sin, cos = sin.astype(dtype), cos[:, : d // 2].astype(dtype)
    if layout == "interleaved":
        pe[:, 0::2], pe[:, 1::2] = sin, cos
    else:
        pe[:, : w.size], pe[:, w.size :] = sin, cos
    return pe
