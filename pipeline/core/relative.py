"""What the relative stage computes (arrays and a summary, no files): RoPE's relative-position diagnostics and
ALiBi's biases, for the validated `relative` config (pipeline.config.validate).

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


# ---------------------------------------------------------------- every family side by side (issue 24)


def gaussian_pairs(samples: int, d_head: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(samples, d/2) complex q and k pairs, N(0, 1) float64 coordinates, seeded `seed` (portable.standard_normal)."""
    x = portable.standard_normal(seed, (2, samples, d_head))
    h = d_head // 2
    return x[0, :, :h] + 1j * x[0, :, h:], x[1, :, :h] + 1j * x[1, :, h:]


def rope_profiles(inv_freq: np.ndarray, factor: float, q: np.ndarray, k: np.ndarray, offsets: np.ndarray) -> dict:
    """Scores a^2 Re sum_i q_i conj(k_i) e^{i delta theta_i} over offsets delta (K,): `self` the mean with k = q
    (a^2 sum_i |q_i|^2 cos(delta theta_i)), `mean` and `std` over the independent pairs (q, k) (Barbero et al.).

    In real arithmetic (Re w e^{i a} = Re w cos a - Im w sin a, w = q conj(k)) with exact products
    (portable.exact_matmul): complex multiplication may be fused into multiply-adds by some CPUs."""
    sin, cos = portable.sin_cos(offsets[:, None] * inv_freq[None, :])  # (K, h)
    a2 = factor * factor
    w_re = q.real * k.real + q.imag * k.imag
    w_im = q.imag * k.real - q.real * k.imag
    independent = a2 * (portable.exact_matmul(w_re, cos.T) - portable.exact_matmul(w_im, sin.T))  # (S, K)
    power = (q.real * q.real + q.imag * q.imag).mean(axis=0)  # (h,) mean of |q_i|^2
    return {
        "self": a2 * portable.exact_matmul(cos, power[:, None])[:, 0],
        "mean": independent.mean(axis=0),
        "std": independent.std(axis=0),
    }


def family_proximities(rel: Any, sinusoids: dict, learned: np.ndarray, biases: np.ndarray) -> dict:
    """family key -> (description, proximity P (N, N), its attention prior, or per-head lists for ALiBi).

    rel: the `relative` config; sinusoids: layout -> (N, d) float64 sinusoidal tables; learned: (N, d) the seeded
    learned table; biases: (heads, N, N) ALiBi's bias (-inf masked) of the first head count."""
    from pipeline.core import pe_properties as pp
    from pipeline.core.rope_scaling import scaled_frequencies

    cfg = rel.properties
    n, d_head = cfg.positions, rel.rope.d_head
    out = {"nope": ("NoPE: no position signal, P = 0", np.zeros((n, n)), np.full((n, n), 1.0 / n))}
    for layout, pe in sinusoids.items():
        p = portable.exact_matmul(pe, pe.T)
        out[f"sinusoidal_{layout}"] = (
            f"sinusoidal ({layout}): PE(i) . PE(j)",
            p,
            pp.softmax_rows(p / np.sqrt(pe.shape[1])),
        )
    p = portable.exact_matmul(learned, learned.T)
    out["learned"] = ("learned (seeded, untrained): PE(i) . PE(j)", p, pp.softmax_rows(p / np.sqrt(learned.shape[1])))
    q, _ = gaussian_pairs(cfg.samples, d_head, cfg.seed)
    offsets = np.arange(-(n - 1), n, dtype=np.float64)
    for key, freq in scaled_frequencies(rel.scaling, d_head, rel.rope.base, rel.rope.scale).items():
        profile = rope_profiles(freq.inv_freq, freq.attention_factor, q, q, offsets)["self"]
        p = pp.toeplitz(profile, n)
        out[f"rope_{key}"] = (f"RoPE {key}: a^2 E[q . R(i - j) q]", p, pp.softmax_rows(p / np.sqrt(d_head)))
    out["alibi"] = ("ALiBi: the bias -m (i - j), mean over heads", list(biases), [pp.softmax_rows(b) for b in biases])
    return out


def properties_table(proximities: dict) -> dict:
    """family key -> {what, each property of pipeline.core.pe_properties.PROPERTIES} (12 significant digits)."""
    from pipeline.core import pe_properties as pp

    table = {}
    for key, (what, p, a) in proximities.items():
        values = pp.mean_scores([pp.scores(x, y) for x, y in zip(p, a)]) if isinstance(p, list) else pp.scores(p, a)
        table[key] = {"what": what, **{k: None if v is None else float(f"{v:.12g}") for k, v in values.items()}}
    return table


def scaling_diagnostics(rel: Any, distances: np.ndarray) -> tuple[dict[str, np.ndarray], dict]:
    """Barbero et al.: per RoPE scaling, RoFormer's decay bound and the mean and spread (std) over the seeded
    independent Gaussian (q, k) of the score against the distance, and the expectation with k = q; each pair's
    wavelength against the original and the extended context. Returns the arrays and the summary."""
    from pipeline.core.rope_scaling import scaled_frequencies, wavelengths

    cfg, rope_cfg = rel.properties, rel.rope
    d_head, factor = rope_cfg.d_head, rope_cfg.scale
    original = rel.scaling.original_context
    q, k = gaussian_pairs(cfg.samples, d_head, cfg.seed)
    arrays: dict[str, np.ndarray] = {"distance": distances}
    summary = {"original_context": original, "extended_context": factor * original, "samples": cfg.samples}
    for key, freq in scaled_frequencies(rel.scaling, d_head, rope_cfg.base, factor).items():
        profiles = rope_profiles(freq.inv_freq, freq.attention_factor, q, k, distances.astype(np.float64))
        bound = rope.decay_bound(torch.from_numpy(distances), d_head, theta=torch.from_numpy(freq.inv_freq)).numpy()
        wave = wavelengths(freq.inv_freq)
        arrays.update({f"{key}_{name}": _round12(v) for name, v in profiles.items()})
        arrays[f"{key}_bound"] = _round12(bound)
        arrays[f"{key}_inv_freq"] = _round12(freq.inv_freq)
        arrays[f"{key}_wavelength"] = _round12(wave)
        summary[key] = {
            "attention_factor": float(f"{freq.attention_factor:.12g}"),
            "rotating_within_original": int((wave <= original).sum()),
            "rotating_within_extended": int((wave <= factor * original).sum()),
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
