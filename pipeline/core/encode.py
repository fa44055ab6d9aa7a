"""What the encode stage computes, as tensors, arrays and dicts (no files): the configured position table
(sinusoidal, or a seeded learned one), its diagnostics, the summary reported as metrics, and the property
plots' columns.

`cfg` is the validated `encoding` config (pipeline.config.validate); n = encoding.max_len, d = d_model.
"""

from __future__ import annotations

from typing import Any


import logging

import numpy as np
import torch

from pipeline.base.errors import PipelineError
from pipeline.base.files import round_significant
from pipeline.core import encoding as pe_lib
from pipeline.core import portable
from pipeline.core.device import resolve_dtype


log = logging.getLogger("pipeline")
MAX_PLOT_ROWS = 4096  # the property plots keep at most this many positions (the metrics see every one)


def model_dim(cfg: Any, glove_dim: int, store_dim: int, glove_dir) -> int:
    """d_model: the GloVe dimension, after checking that glove.dim and encoding.d_model agree with the store."""
    if store_dim != glove_dim:
        raise PipelineError(
            f"glove.dim = {glove_dim} but the vectors in {glove_dir} have "
            f"{store_dim} dimensions: set glove.dim={store_dim}, or re-run the glove stage."
        )
    d = cfg.d_model or store_dim
    if d != store_dim:
        raise PipelineError(
            f"encoding.d_model = {d} differs from the GloVe dimension {store_dim}: the encoding is "
            "added to the word vectors, so set encoding.d_model=null (or to the GloVe dimension)."
        )
    return d


def position_table(cfg: Any, d: int, device: torch.device) -> tuple[torch.Tensor, pe_lib.Diagnostics]:
    """The configured (n, d) table on `device` in encoding.dtype, and its diagnostics: from the closed-form
    profiles for the sinusoid, from float64 Gram products for a learned (seeded random) table."""
    dtype, n, max_size = resolve_dtype(cfg.dtype), cfg.max_len, cfg.max_matrix_size
    if cfg.name == "learned":
        from pipeline.core.random_tables import learned_position_table

        pe = learned_position_table(n, d, cfg.seed, cfg.init, cfg.scale, device=device, dtype=dtype)
        return pe, pe_lib.matrix_diagnostics(pe, cfg.base, cfg.max_offset, max_size)
    pe = pe_lib.sinusoidal_encoding(n, d, cfg.base, layout=cfg.layout, device=device, dtype=dtype)
    return pe, pe_lib.sinusoidal_diagnostics(pe, cfg.base, cfg.max_offset, max_size)


def probes(cfg: Any) -> tuple[list[int], list[tuple[int, int]]]:
    """encoding.norm_positions and distance_pairs inside the table (a warning names how many are skipped)."""
    n = cfg.max_len
    positions, pairs = cfg.norm_positions or [], cfg.distance_pairs or []
    kept_positions = [p for p in positions if p < n]
    kept_pairs = [(p, q) for p, q in pairs if max(p, q) < n]
    skipped = len(positions) - len(kept_positions) + len(pairs) - len(kept_pairs)
    if skipped:
        log.warning(
            "encode: %d probe(s) in encoding.norm_positions / distance_pairs lie beyond encoding.max_len=%d "
            "and are skipped",
            skipped,
            n,
        )
    return kept_positions, kept_pairs


def summary(cfg: Any, pe: torch.Tensor, diag: pe_lib.Diagnostics) -> dict:
    """What data/encode/encode.json holds: the encoding's kind (pipeline.core.sweep.ENCODE_INFO), its property checks
    and probes (metrics). pe: (n, d)."""
    norms, lo, hi, closed = diag.norms, diag.offset_lo, diag.offset_hi, diag.offset_closed
    d = pe.shape[1]
    expected = pe_lib.expected_norm(d)
    norm_positions, distance_pairs = probes(cfg)

    def distance(p: int, q: int) -> float:
        diff = pe[p].to(norms.dtype) - pe[q].to(norms.dtype)
        return float(portable.tree_sum(diff * diff).sqrt())

    return {
        "kind": cfg.name,
        "d_model": d,
        "max_len": cfg.max_len,
        "norm_expected": expected,
        "norm_max_abs_dev": float((norms - expected).abs().max()),
        "offset_distance_max_spread": float((hi - lo).max()) if len(lo) else 0.0,
        "offset_distance_closed_form_max_abs_err": float(torch.maximum((hi - closed).abs(), (lo - closed).abs()).max())
        if len(lo)
        else 0.0,
        "norm": {f"p{p}": float(norms[p]) for p in norm_positions},
        "distance": {f"p{p}_p{q}": distance(p, q) for p, q in distance_pairs},
    }


def _rounded(t: torch.Tensor) -> np.ndarray:
    """float64 values at SIGNIFICANT_DIGITS of the array's largest magnitude (their last bits vary by CPU)."""
    x = t.detach().cpu().double().numpy()
    return round_significant(x, floor=float(np.abs(x).max()) if x.size else 0.0)


def matrices(diag: pe_lib.Diagnostics) -> dict[str, np.ndarray]:
    """{"dot", "distance"}: (M, M) float32 block means of PE PE^T and of ||PE(a) - PE(b)||. float32 is their
    fixed precision: rounding to more digits first would only add a second rounding point."""
    return {
        "dot": diag.dot_blocks.cpu().numpy().astype(np.float32),
        "distance": diag.distance_blocks.cpu().numpy().astype(np.float32),
    }


def profile_arrays(diag: pe_lib.Diagnostics, n: int) -> dict[str, np.ndarray] | None:
    """The sinusoid's 1-D profiles (offset k = 0..n-1, dot(k), distance(k), the unpaired sine of odd d, empty
    for even d), float64 at fixed precision; None for a learned table."""
    profiles = diag.profiles
    if profiles is None:
        return None
    unpaired = np.empty(0) if profiles.unpaired is None else _rounded(profiles.unpaired)
    return {
        "offset": np.arange(n),
        "dot": _rounded(profiles.dot),
        "distance": _rounded(profiles.distance),
        "unpaired": unpaired,
    }


def matrices_info(cfg: Any, diag: pe_lib.Diagnostics) -> dict:
    """data/encode/matrices.json: encoding, layout, block side f, side, positions covered, Toeplitz, method."""
    sinusoidal = diag.profiles is not None
    side = diag.dot_blocks.shape[0]
    return {
        "encoding": cfg.name,
        "layout": cfg.layout if sinusoidal else None,
        "block": diag.factor,
        "side": side,
        "positions_covered": side * diag.factor,
        "toeplitz": sinusoidal and diag.profiles.toeplitz,
        "method": ("closed-form profiles" if sinusoidal else "float64 Gram of the matrix")
        + ("" if diag.factor == 1 else ", exact block means"),
    }


def property_columns(diag: pe_lib.Diagnostics, expected: float, kind: str) -> tuple[dict[str, list], dict[str, list]]:
    """The property plots' data: (position, norm, sqrt_d_over_2, norm_dev_1e-9, encoding: `kind`, the configured
    encoding's name, which the plot's legend shows) every ceil(n / MAX_PLOT_ROWS)-th
    position, and (k, min_over_p, max_over_p, closed_form) for k = 1..K. norm_dev_1e-9 is norm - sqrt(d/2) in
    units of 1e-9 (what `dvc plots` draws: an axis of the deviation, not of 5 +- float noise), from the norm as
    written (12 significant digits), so it is the same on every machine."""
    norms = diag.norms.cpu().numpy()
    stride = -(-len(norms) // MAX_PLOT_ROWS)
    shown = list(range(0, len(norms), stride))
    written = [float(round_significant(float(norms[p]))) for p in shown]
    deviation = [round((norm - expected) / 1e-9, 3) for norm in written]
    lo, hi, closed = (t.cpu().numpy() for t in (diag.offset_lo, diag.offset_hi, diag.offset_closed))
    return (
        {
            "position": shown,
            "norm": written,
            "sqrt_d_over_2": [expected] * len(shown),
            "norm_dev_1e-9": deviation,
            "encoding": [kind] * len(shown),
        },
        {
            "k": list(range(1, len(lo) + 1)),
            "min_over_p": lo.tolist(),
            "max_over_p": hi.tolist(),
            "closed_form": closed.tolist(),
        },
    )
