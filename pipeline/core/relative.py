"""What the encode stage computes for RoPE and ALiBi (arrays and a summary, no files): RoPE's relative-position
diagnostics and ALiBi's biases, for the validated `relative` config (pipeline.config.validate).

RoPE (pipeline.core.rope), at head dimension d = relative.rope.d_head:
  - the relative-only check: a seeded random query q and key k (float64 normal draws, portable) rotated to every
    position 0 .. N-1 (N = relative.rope.positions), in both layouts, in float64 and in float32; the spread over
    m of the scores with the same m - n (0 for a function of m - n), and the distance to the closed form;
  - RoFormer's long-term decay bound over distances 0 .. relative.rope.max_distance for the base, a larger base,
    NTK-aware scaling and position interpolation by relative.rope.scale.
ALiBi (pipeline.core.alibi): for each head count of relative.alibi.heads its slopes, the (heads, L, L) bias
(L = relative.alibi.length) and the penalty over distances 0 .. relative.alibi.max_distance.

Every number is computed with portable arithmetic (pipeline.core.portable: the same bits on every machine); arrays
are written as float64 at 12 significant digits of their largest magnitude, so that rounding noise of float64 (a
spread of 1e-13 that is 0 in theory) reads as 0.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from pipeline.base.files import round_significant
from pipeline.core import alibi, portable, rope
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
    """(d,) q and k drawn N(0, 1) in float64 from a generator seeded `seed` (portable.standard_normal: the same on
    every machine and device)."""
    q, k = torch.from_numpy(portable.standard_normal(seed, (2, d_head)))
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


# ---------------------------------------------------------------- RoPE's expected scores and its scalings


def gaussian_pairs(samples: int, d_head: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(samples, d/2) complex q and k pairs, N(0, 1) float64 coordinates, seeded `seed` (portable.standard_normal)."""
    x = portable.standard_normal(seed, (2, samples, d_head))
    h = d_head // 2
    return x[0, :, :h] + 1j * x[0, :, h:], x[1, :, :h] + 1j * x[1, :, h:]


def cos_sum(inv_freq: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """(K,) sum_i cos(delta theta_i) for each offset delta of offsets (K,), from |delta| (so that the profile is
    exactly even: P(delta) = P(-delta) to the bit); portable.sin_cos, numpy's pairwise sum over the pairs."""
    _, cos = portable.sin_cos(np.abs(offsets)[:, None] * inv_freq[None, :])
    return cos.sum(axis=1)


def rope_self_expectation(inv_freq: np.ndarray, factor: float, offsets: np.ndarray) -> np.ndarray:
    """(K,) RoPE's expected score with k = q, exactly: E[a^2 Re sum_i |q_i|^2 e^{i delta theta_i}] =
    2 a^2 sum_i cos(delta theta_i), since E|q_i|^2 = 2 for a pair of N(0, 1) coordinates (no sampling)."""
    return 2.0 * (factor * factor) * cos_sum(inv_freq, offsets)


def rope_independent_std(factor: float, d_head: int) -> float:
    """The standard deviation of the score a^2 q . R(delta) k of independent q, k ~ N(0, I_d), exactly a^2 sqrt(d) at
    every offset (each pair adds variance 2 a^4: E(Re q_i conj(k_i) e^{i phi})^2 = 2); its mean is exactly 0."""
    return factor * factor * math.sqrt(d_head)


def rope_scores(inv_freq: np.ndarray, factor: float, q: np.ndarray, k: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """(S, K) a^2 Re sum_i q_i conj(k_i) e^{i delta theta_i} of each sampled pair (q, k) (S, d/2 complex) at each
    offset delta (K,). In real arithmetic (Re w e^{i a} = Re w cos a - Im w sin a, w = q conj(k)) with exact products
    (portable.exact_matmul): complex multiplication may be fused into multiply-adds by some CPUs."""
    sin, cos = portable.sin_cos(offsets[:, None] * inv_freq[None, :])  # (K, h)
    w_re = q.real * k.real + q.imag * k.imag
    w_im = q.imag * k.real - q.real * k.imag
    return (factor * factor) * (portable.exact_matmul(w_re, cos.T) - portable.exact_matmul(w_im, sin.T))


def scaling_diagnostics(rel: Any, distances: np.ndarray) -> tuple[dict[str, np.ndarray], dict]:
    """Barbero et al., in closed form: per RoPE scaling at d = relative.properties.d, RoFormer's decay bound, the
    expected score with k = q (2 a^2 sum_i cos(delta theta_i)) and the spread a^2 sqrt(d) of the score of independent
    Gaussian q, k (whose mean is 0 at every distance: no decay in expectation) against the distance; each pair's
    wavelength against the original and the extended context. Returns the arrays and the summary."""
    from pipeline.core.rope_scaling import scaled_frequencies, wavelengths

    d, factor = rel.properties.d, rel.rope.scale
    original = rel.scaling.original_context
    contexts = {"longrope": (rel.scaling.longrope_original_context, rel.scaling.longrope_context)}
    arrays: dict[str, np.ndarray] = {"distance": distances}
    summary = {"d": d, "original_context": original, "extended_context": factor * original}
    for key, freq in scaled_frequencies(rel.scaling, d, rel.rope.base, factor).items():
        offsets = distances.astype(np.float64)
        bound = rope.decay_bound(torch.from_numpy(distances), d, theta=torch.from_numpy(freq.inv_freq)).numpy()
        wave = wavelengths(freq.inv_freq)
        arrays[f"{key}_self"] = _round12(rope_self_expectation(freq.inv_freq, freq.attention_factor, offsets))
        arrays[f"{key}_bound"] = _round12(bound)
        arrays[f"{key}_inv_freq"] = _round12(freq.inv_freq)
        arrays[f"{key}_wavelength"] = _round12(wave)
        # LongRoPE's contexts are its released model's, the other scalings' the config's L and s L
        low, high = contexts.get(key, (original, factor * original))
        summary[key] = {
            "attention_factor": float(f"{freq.attention_factor:.12g}"),
            "independent_std": float(f"{rope_independent_std(freq.attention_factor, d):.12g}"),
            "original_context": low,
            "extended_context": high,
            "rotating_within_original": int((wave <= low).sum()),
            "rotating_within_extended": int((wave <= high).sum()),
            "longest_wavelength": float(f"{wave.max():.12g}"),
        }
    return arrays, summary


def _round12(x: np.ndarray) -> np.ndarray:
    return round_significant(np.asarray(x, dtype=np.float64), floor=float(np.abs(x).max()))


def distance_grid(max_distance: int) -> np.ndarray:
    """Every distance 0..256, then about 200 log-spaced ones up to max_distance (integers)."""
    dense = np.arange(min(256, max_distance) + 1)
    sparse = portable.geomspace(257, max(max_distance, 257), 200).round().astype(np.int64) if max_distance > 256 else []
    return np.unique(np.concatenate([dense, sparse])).astype(np.int64)
