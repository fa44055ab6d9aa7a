"""Seeded random tables: the learned (untrained) position table behind `encoding: learned`, and the tables of
tutorial 001's layers. torch is imported inside the functions, so that importing INITS (as the config schema
does) stays light.

Random tables are drawn on the CPU from a `torch.Generator` (uniform: float32 draws; normal: float64 uniforms through
a portable Box-Muller, pipeline.core.portable), then moved and cast, so the same seed gives the same values on every
machine, device and dtype."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from pipeline.base.errors import PipelineError

if TYPE_CHECKING:
    import torch

INITS = ("uniform", "normal")


def _is_int(value: object) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def check_init(seed: object, init: object, scale: object) -> None:
    """One clear error for a bad seed / init / scale argument (the config's are checked by pipeline.config)."""
    if not _is_int(seed) or seed < 0:
        raise PipelineError(f"seed = {seed!r} is invalid: it must be an integer >= 0, e.g. seed=0.")
    if init not in INITS:
        raise PipelineError(f"init = {init!r} is invalid: use one of {', '.join(INITS)}.")
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not np.isfinite(scale) or scale <= 0:
        raise PipelineError(f"scale = {scale!r} is invalid: it must be a number > 0, e.g. scale=0.05.")


def random_table(
    rows: int, cols: int, generator: "torch.Generator", init: str = "uniform", scale: float = 0.05
) -> "torch.Tensor":
    """(rows, cols) float32 CPU table drawn from `generator`: U(-scale, scale) or N(0, scale^2)."""
    import torch

    if init == "uniform":
        return (2.0 * torch.rand(rows, cols, generator=generator) - 1.0) * scale
    if init == "normal":
        # float64 uniforms (53 bits from the generator) through a portable Box-Muller: torch.randn's own transform
        # vectorises by CPU capability, so its last bits vary between machines
        from pipeline.core.portable import box_muller

        count = rows * cols
        u = torch.rand(2, (count + 1) // 2, generator=generator, dtype=torch.float64)
        z1, z2 = box_muller(u[0], u[1])
        return (torch.stack([z1, z2], dim=1).reshape(-1)[:count].reshape(rows, cols) * scale).to(torch.float32)
    raise PipelineError(f"init = {init!r} is invalid: use one of {', '.join(INITS)}.")


def learned_position_table(
    max_len: int,
    d_model: int,
    seed: int,
    init: str = "uniform",
    scale: float = 0.05,
    *,
    device: "torch.device | str | None" = None,
    dtype: "torch.dtype | None" = None,
) -> "torch.Tensor":
    """(max_len, d_model) random position table, a function of (seed, init, scale) only.

    Row p is the embedding of position p before any training (Keras Embedding initialisation for
    init='uniform', scale=0.05). Rows of a uniform table have norm about scale * sqrt(d/3), a
    normal one scale * sqrt(d); sinusoidal rows have sqrt(d/2) (scale sqrt(3/2) resp. sqrt(1/2)
    match it).
    """
    import torch

    check_init(seed, init, scale)
    if not _is_int(max_len) or not _is_int(d_model) or max_len < 1 or d_model < 1:
        raise PipelineError(f"max_len ({max_len!r}) and d_model ({d_model!r}) must be integers >= 1.")
    generator = torch.Generator().manual_seed(int(seed))
    return random_table(max_len, d_model, generator, init, scale).to(
        device=device or "cpu", dtype=dtype or torch.float32
    )
