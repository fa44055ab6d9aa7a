"""RoPE's frequency scalings for longer contexts, computed in numpy float64 (no torch, no transformers), their powers
and logarithms correctly rounded (pipeline.core.portable: the same bits on every machine).

Each scaling gives the (d/2,) inverse frequencies theta_i of a head of dimension d and an attention factor a (the
cos and sin tables are multiplied by a, so every score q . R(m - n) k by a^2). They follow the reference, HF
transformers' `modeling_rope_utils.ROPE_INIT_FUNCTIONS` (tests/test_rope_scaling.py checks them against it), for a
context extended by s = `factor` from the original (training) context L:

    default   theta_i = base^(-2i/d), a = 1
    linear    theta_i / s (position interpolation)
    ntk       base' = base * s^(d/(d-2)) (NTK-aware: the lowest frequency slows down by exactly s)
    dynamic   base' = base * (s * n / L - (s - 1))^(d/(d-2)) at sequence length n >= L (dynamic NTK)
    yarn      theta_i blended between theta_i (fast pairs, > beta_fast rotations in L) and theta_i / s (slow pairs,
              < beta_slow rotations) by a linear ramp over the pair index; a = 0.1 ln s + 1
    llama3    wavelength 2 pi / theta_i < L / high_freq_factor: kept; > L / low_freq_factor: theta_i / factor;
              between: smoothly blended (Llama 3.1: factor 8, low/high 1 and 4, L = 8192: 8192 and 2048 tokens)
    longrope  theta_i / f_i with per-pair factors f (long_factor beyond L, short_factor within);
              a = sqrt(1 + ln s / ln L); the config's factors and contexts are a released model's
              (relative.scaling.longrope_source, by default Phi-3-medium-128k-instruct: L = 4,096, s = 32)
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple, Sequence

import numpy as np

from pipeline.core.portable import cr_log, cr_pow, cr_powers

SCALINGS = ("default", "linear", "ntk", "dynamic", "yarn", "llama3", "longrope")


class RopeFrequencies(NamedTuple):
    """One scaling's (d/2,) float64 inverse frequencies and its attention factor."""

    inv_freq: np.ndarray
    attention_factor: float


def ntk_base(base: float, scale: float, d_head: int) -> float:
    """NTK-aware base for a context `scale` s times longer: base * s^(d / (d - 2))."""
    if d_head < 2 or d_head % 2:
        raise ValueError(f"the head dimension d_head = {d_head} must be even and >= 2 (RoPE rotates pairs)")
    if d_head == 2:
        raise ValueError("NTK-aware scaling needs d_head > 2 (its exponent is d / (d - 2))")
    return float(base) * cr_pow(float(scale), d_head / (d_head - 2))


def default_frequencies(d_head: int, base: float) -> np.ndarray:
    """(d/2,) theta_i = base^(-2i/d), float64 (the sinusoid's, pipeline.core.sinusoid.frequencies)."""
    from pipeline.core.sinusoid import frequencies

    return frequencies(d_head, base)


def wavelengths(inv_freq: np.ndarray) -> np.ndarray:
    """2 pi / theta_i: each pair's period in positions."""
    return 2 * math.pi / inv_freq


def linear(d_head: int, base: float, factor: float) -> RopeFrequencies:
    return RopeFrequencies(default_frequencies(d_head, base) / factor, 1.0)


def ntk(d_head: int, base: float, factor: float) -> RopeFrequencies:
    return RopeFrequencies(default_frequencies(d_head, ntk_base(base, factor, d_head)), 1.0)


def dynamic(d_head: int, base: float, factor: float, original: int, seq_len: int) -> RopeFrequencies:
    """Dynamic NTK at sequence length seq_len (below the original context L: L, i.e. the base unchanged)."""
    seq_len = max(seq_len, original)
    scaled = base * cr_pow(factor * seq_len / original - (factor - 1), d_head / (d_head - 2))
    return RopeFrequencies(default_frequencies(d_head, scaled), 1.0)


def yarn_attention_factor(factor: float) -> float:
    """YaRN's a = 0.1 ln s + 1 (1 for s <= 1)."""
    return 1.0 if factor <= 1 else 0.1 * cr_log(factor) + 1.0


def yarn_correction_range(
    d_head: int, base: float, original: int, beta_fast: float, beta_slow: float
) -> tuple[float, float]:
    """The pair indices (low, high) where the ramp runs: the dimension with beta_fast rotations in the original
    context L (floored) and the one with beta_slow (ceiled), within [0, d - 1]."""

    def dim(rotations: float) -> float:
        return d_head * cr_log(original / (rotations * 2 * math.pi)) / (2 * cr_log(base))

    return max(math.floor(dim(beta_fast)), 0), min(math.ceil(dim(beta_slow)), d_head - 1)


def yarn(d_head: int, base: float, factor: float, original: int, beta_fast: float, beta_slow: float) -> RopeFrequencies:
    theta = default_frequencies(d_head, base)
    low, high = yarn_correction_range(d_head, base, original, beta_fast, beta_slow)
    ramp = np.clip((np.arange(d_head // 2, dtype=np.float64) - low) / ((high - low) or 0.001), 0, 1)
    extrapolation = 1 - ramp  # 1: keep theta_i, 0: interpolate theta_i / s
    inv = theta / factor * (1 - extrapolation) + theta * extrapolation
    return RopeFrequencies(inv, yarn_attention_factor(factor))


def llama3_thresholds(original: int, low_freq_factor: float, high_freq_factor: float) -> tuple[float, float]:
    """Llama 3.1's wavelength thresholds (low, high) in tokens: L / low_freq_factor and L / high_freq_factor."""
    return original / low_freq_factor, original / high_freq_factor


def llama3(
    d_head: int, base: float, factor: float, original: int, low_freq_factor: float, high_freq_factor: float
) -> RopeFrequencies:
    theta = default_frequencies(d_head, base)
    wave = wavelengths(theta)
    low_wave, high_wave = llama3_thresholds(original, low_freq_factor, high_freq_factor)
    kept = np.where(wave > low_wave, theta / factor, theta)
    smooth = (original / wave - low_freq_factor) / (high_freq_factor - low_freq_factor)
    blended = (1 - smooth) * kept / factor + smooth * kept
    medium = (wave >= high_wave) & (wave <= low_wave)
    return RopeFrequencies(np.where(medium, blended, kept), 1.0)


def longrope_factors(d_head: int, factor: float, short: Sequence[float], long: Sequence[float]) -> tuple:
    """The per-pair (short, long) factors: as given, or (empty lists) 1 for every pair within the original context
    and s^(2i/(d-2)) beyond it (1 for the fastest pair up to s for the slowest, LongRoPE's searched factors'
    shape)."""
    h = d_head // 2
    short = np.asarray(short, dtype=np.float64) if len(short) else np.ones(h)
    long = np.asarray(long, dtype=np.float64) if len(long) else cr_powers(float(factor), np.arange(h) / max(h - 1, 1))
    for name, values in (("short", short), ("long", long)):
        if values.shape != (h,):
            raise ValueError(f"LongRoPE {name} factors: {values.size} values, d_head / 2 = {h} needed")
    return short, long


def longrope(
    d_head: int,
    base: float,
    factor: float,
    original: int,
    seq_len: int,
    short: Sequence[float] = (),
    long: Sequence[float] = (),
) -> RopeFrequencies:
    short_f, long_f = longrope_factors(d_head, factor, short, long)
    ext = long_f if seq_len > original else short_f
    attention = 1.0 if factor <= 1 else math.sqrt(1 + cr_log(factor) / cr_log(original))
    return RopeFrequencies(default_frequencies(d_head, base) / ext, attention)


def scaled_frequencies(cfg: Any, d_head: int, base: float, factor: float) -> dict[str, RopeFrequencies]:
    """Every scaling of SCALINGS for a context `factor` times the original one; cfg: relative.scaling (the original
    context, YaRN's betas, Llama 3.1's factors, LongRoPE's per-pair factors and contexts). Dynamic NTK is taken at the
    extended length factor * L; LongRoPE is a released model's (its factors, s = longrope_context /
    longrope_original_context) at its extended length longrope_context."""
    original = cfg.original_context
    extended = int(round(factor * original))
    return {
        "default": RopeFrequencies(default_frequencies(d_head, base), 1.0),
        "linear": linear(d_head, base, factor),
        "ntk": ntk(d_head, base, factor),
        "dynamic": dynamic(d_head, base, factor, original, extended),
        "yarn": yarn(d_head, base, factor, original, cfg.yarn_beta_fast, cfg.yarn_beta_slow),
        "llama3": llama3(
            d_head,
            base,
            cfg.llama3_factor,
            original,
            cfg.llama3_low_freq_factor,
            cfg.llama3_high_freq_factor,
        ),
        "longrope": longrope(
            d_head,
            base,
            cfg.longrope_context / cfg.longrope_original_context,
            cfg.longrope_original_context,
            cfg.longrope_context,
            cfg.longrope_short_factor,
            cfg.longrope_long_factor,
        ),
    }
