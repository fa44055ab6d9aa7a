"""Validation of random-table settings (seed, init, scale), kept free of torch so that config checks stay fast."""
from __future__ import annotations

import numpy as np

from pipeline.errors import PipelineError

INITS = ("uniform", "normal")


def _is_int(value: object) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def check_init(seed: object, init: object, scale: object, where: str = "") -> None:
    """One clear error for a bad seed / init / scale; `where` prefixes the names (e.g. 'encoding.')."""
    if not _is_int(seed) or seed < 0:
        raise PipelineError(f"{where}seed = {seed!r} is invalid: it must be an integer >= 0, e.g. {where}seed=0.")
    if init not in INITS:
        raise PipelineError(f"{where}init = {init!r} is invalid: use one of {', '.join(INITS)}.")
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not np.isfinite(scale) or scale <= 0:
        raise PipelineError(f"{where}scale = {scale!r} is invalid: it must be a number > 0, e.g. {where}scale=0.05.")
