"""What the relative stage computes (arrays and a summary, no files): RoPE's relative-position diagnostics and
ALiBi's biases, for the validated `relative` config (pipeline.config.validate).

RoPE (pipeline.core.rope), at head dimension d = relative.rope.d_head:
  - the relative-only check: a seeded random query q and key k (float64 normal draws) rotated to every
    position 0 .. N-1 (N = relative.rope.positions), in both layouts, in float64 and in float32; the spread over
    m of the scores with the same m - n (0 for a function of m - n), and the distance to the closed form;
  - RoFormer's long-term decay bound over distances 0 .. relative.rope.max_distance for the base, a larger base,
    NTK-aware scaling and position interpolation by relative.rope.scale.
ALiBi (pipeline.core.alibi): for each head count of relative.alibi.heads its slopes, the (heads, L, L) bias
(L = relative.alibi.length) and the penalty over distances 0 .. relative.alibi.max_distance.

Arrays are float64 rounded to 12 significant digits of their largest magnitude (their last bits vary by CPU),
so that files and figures are the same on every machine.
"""

from __future__ import annotations

from typing import Any


import numpy as np
import torch

from pipeline.base.files import round_significant
from pipeline.core import alibi, rope
from pipeline.core.device import has_float64


CHECK_DTYPES = {"float64": torch.float64, "float32": torch.float32}


def _fixed(t: torch.Tensor, scale: float | None = None) -> np.ndarray:
    """float64 at 12 significant digits of `scale` (default: the largest finite magnitude); -inf passes."""
    x = t.detach().cpu().double().numpy()
    finite = np.isfinite(x)
    if scale is None:
        scale = float(np.abs(x[finite]).max()) if finite.any() else 0.0
    return round_significant(x, floor=scale)


def _work(device: torch.device) -> torch.device:
    """float64 work happens on the device, or on the CPU for devices without float64 (MPS)."""
    return device if has_float64(device) else torch.device("cpu")


def query_key(d_head: int, seed: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """(d,) q and k drawn N(0, 1) in float64 from a CPU generator seeded `seed` (the same on every device)."""
    generator = torch.Generator().manual_seed(seed)
    q, k = torch.randn(2, d_head, dtype=torch.float64, generator=generator)
    return q.to(device), k.to(device)


def rope_diagnostics(cfg: Any, device: torch.device) -> tuple[dict[str, np.ndarray], dict]:
    """cfg: relative.rope. Returns the arrays of data/relative/rope.npz and the summary's `rope` entry."""
    work = _work(device)
    d, n, layout = cfg.d_head, cfg.positions, cfg.layout
    q, k = query_key(d, cfg.seed, work)
    arrays: dict[str, np.ndarray] = {}
    checks: dict[str, dict] = {}
    for name in rope.LAYOUTS:
        entry = {}
        for dtype_name, dtype in CHECK_DTYPES.items():
            check = rope.score_check(q, k, n, cfg.base, layout=name, dtype=dtype)
            # deviations at the scores' own precision: float64 rounding noise (~1e-13) is 0 on every machine
            scale = float(check.closed.abs().max())
            spread, error = _fixed(check.spread, scale), _fixed(check.error, scale)
            entry[f"{dtype_name}_max_spread"] = float(spread.max())
            entry[f"{dtype_name}_max_error"] = float(error.max())
            if name == layout:
                if dtype_name == "float64":
                    arrays["scores"] = _fixed(check.scores)
                    arrays["offsets"] = check.offsets.cpu().numpy()
                    arrays["closed_form"] = _fixed(check.closed)
                arrays[f"spread_{dtype_name}"] = spread
        entry["score_scale"] = float(np.abs(_fixed(check.closed)).max())
        checks[name] = entry

    distances = torch.arange(cfg.max_distance + 1, device=work)
    arrays["distance"] = distances.cpu().numpy()
    decay = {}
    for variant in rope.scalings(cfg.base, cfg.larger_base, cfg.scale, d):
        bound = _fixed(rope.decay_bound(distances, d, variant.base, position_scale=variant.position_scale))
        arrays[f"bound_{variant.key}"] = bound
        decay[variant.key] = {
            "base": variant.base,
            "position_scale": variant.position_scale,
            "lowest_wavelength": rope.lowest_wavelength(d, variant.base, variant.position_scale),
            **{f"d{r}": float(bound[r]) for r in cfg.report_distances},
        }
    summary = {
        "d_head": d,
        "base": cfg.base,
        "larger_base": cfg.larger_base,
        "scale": cfg.scale,
        "layout": layout,
        "positions": n,
        "seed": cfg.seed,
        "max_distance": cfg.max_distance,
        "relative_only": checks,
        "decay_bound_at_rest": rope.decay_at_rest(d),
        "decay_bound": decay,
    }
    return arrays, summary


def alibi_diagnostics(cfg: Any, device: torch.device) -> tuple[dict[str, np.ndarray], dict]:
    """cfg: relative.alibi. Returns the arrays of data/relative/alibi.npz and the summary's `alibi` entry."""
    work = _work(device)
    distances = torch.arange(cfg.max_distance + 1, device=work)
    arrays: dict[str, np.ndarray] = {"distance": distances.cpu().numpy()}
    heads, worst = {}, 0.0
    for count in cfg.heads:
        slopes = alibi.slopes(count, work)
        bias = alibi.bias(slopes, cfg.length, causal=cfg.causal)
        worst = max(worst, alibi.toeplitz_deviation(bias))
        arrays[f"slopes_h{count}"] = _fixed(slopes)
        arrays[f"bias_h{count}"] = _fixed(bias)  # -inf (masked) passes unchanged
        arrays[f"penalty_h{count}"] = _fixed(alibi.penalty(slopes, distances))
        heads[f"h{count}"] = {
            "slopes": slopes.cpu().tolist(),
            "slope_exponents": [str(e) for e in alibi.slope_exponents(count)],
            "half_weight_distance": _fixed(alibi.half_weight_distance(slopes)).tolist(),
        }
    summary = {
        "length": cfg.length,
        "causal": cfg.causal,
        "max_distance": cfg.max_distance,
        "bias_toeplitz_deviation": worst,
        "heads": heads,
    }
    return arrays, summary
