"""RoPE's scalings (pipeline.core.rope_scaling) in float64: the published numbers, and parity with the reference,
HF transformers' ROPE_INIT_FUNCTIONS (the optional extra `.[oracle]`; skipped where it is not installed)."""

from __future__ import annotations

import math

import numpy as np

from pipeline.config.schema import RopeScalingConfig
import pytest

from pipeline.core import rope_scaling as rs

SCALING = {
    "original_context": 8192,
    "yarn_beta_fast": 32.0,
    "yarn_beta_slow": 1.0,
    "llama3_factor": 8.0,
    "llama3_low_freq_factor": 1.0,
    "llama3_high_freq_factor": 4.0,
    "longrope_short_factor": [],
    "longrope_long_factor": [],
    "longrope_source": "test",
    "longrope_original_context": 8192,
    "longrope_context": 32768,
}


@pytest.mark.parametrize("d, s", [(4, 2.0), (64, 4.0), (128, 8.0), (128, 16.0)])
def test_ntk_slows_the_lowest_frequency_by_exactly_s(d, s):
    """NTK-aware base * s^(d/(d-2)): theta_{d/2-1} becomes theta_{d/2-1} / s, theta_0 = 1 stays."""
    base = 10000.0
    # Python's pow is within an ulp on any libm, ours correctly rounded, one product: 2 ulp apart at most, 1e-15 is
    # 4.5 (any other exponent is off by far more)
    assert rs.ntk_base(base, s, d) == pytest.approx(base * s ** (d / (d - 2)), rel=1e-15)
    theta, scaled = rs.default_frequencies(d, base), rs.ntk(d, base, s).inv_freq
    assert scaled[0] == theta[0] == 1.0
    # ours on both sides (correctly rounded powers): the exponent's rounding moves them by ~ln(base) eps
    assert scaled[-1] == pytest.approx(theta[-1] / s, rel=1e-13)


@pytest.mark.parametrize("s", [1.0, 2.0, 4.0, 16.0, 32.0])
def test_yarn_attention_factor(s):
    """YaRN: a = 0.1 ln s + 1 (1 at s = 1); the yarn scaling returns it."""
    # math.log is within an ulp on any libm; scaled by 0.1 and added to 1: ~1 ulp of the sum apart, 1e-15 is 4.5
    assert rs.yarn_attention_factor(s) == pytest.approx(0.1 * math.log(s) + 1, rel=1e-15)
    assert rs.yarn(128, 10000.0, s, 4096, 32, 1).attention_factor == rs.yarn_attention_factor(s)


def test_llama31_wavelength_thresholds():
    """Llama 3.1 (factor 8, low/high frequency factors 1 and 4, original context 8192): wavelengths above 8192
    tokens are divided by 8, below 2048 kept, and between them blended."""
    assert rs.llama3_thresholds(8192, 1.0, 4.0) == (8192.0, 2048.0)
    d, base = 128, 500000.0
    theta = rs.default_frequencies(d, base)
    out = rs.llama3(d, base, 8.0, 8192, 1.0, 4.0).inv_freq
    wave = rs.wavelengths(theta)
    assert np.array_equal(out[wave < 2048], theta[wave < 2048])
    np.testing.assert_allclose(out[wave > 8192], theta[wave > 8192] / 8, rtol=1e-15)  # a division by 8 is exact
    mid = (wave >= 2048) & (wave <= 8192)
    assert mid.any() and np.all(out[mid] < theta[mid]) and np.all(out[mid] > theta[mid] / 8)


def test_linear_is_position_interpolation_and_yarn_lies_between():
    d, base, s = 128, 10000.0, 4.0
    theta = rs.default_frequencies(d, base)
    np.testing.assert_array_equal(rs.linear(d, base, s).inv_freq, theta / s)
    yarn = rs.yarn(d, base, s, 4096, 32, 1).inv_freq
    # ours on both sides: the blend of theta and theta / s at the lowest frequency rounds once or twice (2 ulp)
    assert yarn[0] == theta[0] and yarn[-1] == pytest.approx(theta[-1] / s, rel=1e-15)
    assert np.all(yarn <= theta) and np.all(yarn >= theta / s * (1 - 1e-15))


def test_dynamic_within_the_original_context_is_the_default():
    d, base = 64, 10000.0
    np.testing.assert_array_equal(rs.dynamic(d, base, 4.0, 2048, 1000).inv_freq, rs.default_frequencies(d, base))


def test_longrope_is_phi3_medium_128k_by_default():
    """The default LongRoPE is a released model's: Phi-3-medium-128k-instruct's 64 long factors (head dimension 128),
    1 for the 13 fastest pairs up to 65 for the slowest, non-decreasing; its contexts 4,096 -> 131,072 (s = 32) give
    the attention factor sqrt(1 + ln 32 / ln 4096) = sqrt(17/12)."""
    cfg = RopeScalingConfig()
    long = np.array(cfg.longrope_long_factor)
    assert long.shape == (64,) and np.all(long[:13] == 1.0) and long[-1] == 65.0 and np.all(np.diff(long) >= 0)
    assert "Phi-3-medium-128k-instruct" in cfg.longrope_source
    freq = rs.scaled_frequencies(cfg, 128, 10000.0, 4.0)["longrope"]
    assert freq.attention_factor == pytest.approx(math.sqrt(17 / 12), rel=1e-15)
    np.testing.assert_array_equal(freq.inv_freq, rs.default_frequencies(128, 10000.0) / long)


def test_longrope_default_factors_and_wrong_lengths():
    short, long = rs.longrope_factors(8, 4.0, [], [])
    np.testing.assert_array_equal(short, np.ones(4))
    # numpy's power (an ulp or two by CPU kernel) against ours (correctly rounded): 1e-15 is 4.5 ulp of these
    np.testing.assert_allclose(long, 4.0 ** (np.arange(4) / 3), rtol=1e-15)
    with pytest.raises(ValueError, match="d_head / 2 = 4 needed"):
        rs.longrope_factors(8, 4.0, [1.0, 2.0], [])


# ---------------------------------------------------------------- parity with HF transformers

SETTINGS = [  # (d, base, factor, original context)
    (64, 10000.0, 2.0, 2048),
    (128, 10000.0, 4.0, 4096),
    (128, 500000.0, 8.0, 8192),
    (96, 1000000.0, 16.0, 32768),
]


def _hf_config(transformers, d, base, rope_scaling, max_positions, original=None):
    """A LlamaConfig (public API) with head_dim d, one head, and the rope_scaling dict."""
    config = transformers.LlamaConfig(
        hidden_size=d,
        num_attention_heads=1,
        num_key_value_heads=1,
        head_dim=d,
        rope_theta=base,
        max_position_embeddings=max_positions,
        rope_scaling=rope_scaling,
    )
    if original is not None:  # LongRoPE reads it from the config itself (factor = max_positions / original)
        config.original_max_position_embeddings = original
    return config


def _hf_cases(d, base, s, original):
    """scaling key -> (rope_scaling dict, max_position_embeddings, original on the config, seq_len, ours)."""
    h = d // 2
    short = list(np.linspace(1.0, 1.5, h))
    long = list(np.linspace(1.0, 2 * s, h))
    extended = int(s * original)  # LongRoPE's own contexts are set to the same L and s L here
    cfg = {
        **SCALING,
        "original_context": original,
        "longrope_short_factor": short,
        "longrope_long_factor": long,
        "longrope_original_context": original,
        "longrope_context": extended,
    }
    ours = rs.scaled_frequencies(RopeScalingConfig(**cfg), d, base, s)
    return {
        "default": ({"rope_type": "default"}, original, None, None, ours["default"]),
        "linear": ({"rope_type": "linear", "factor": s}, original, None, None, ours["linear"]),
        "dynamic": ({"rope_type": "dynamic", "factor": s}, original, None, extended, ours["dynamic"]),
        "yarn": (
            {
                "rope_type": "yarn",
                "factor": s,
                "beta_fast": 32.0,
                "beta_slow": 1.0,
                "original_max_position_embeddings": original,
            },
            extended,
            None,
            None,
            ours["yarn"],
        ),
        "llama3": (
            {
                "rope_type": "llama3",
                "factor": 8.0,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": original,
            },
            extended,
            None,
            None,
            ours["llama3"],
        ),
        "longrope": (
            {"rope_type": "longrope", "factor": s, "short_factor": short, "long_factor": long},
            extended,
            original,
            extended,
            ours["longrope"],
        ),
        "longrope_short": (
            {"rope_type": "longrope", "factor": s, "short_factor": short, "long_factor": long},
            extended,
            original,
            original,
            rs.longrope(d, base, s, original, original, short, long),
        ),
    }


@pytest.mark.parametrize("d, base, s, original", SETTINGS)
def test_scalings_equal_hf_transformers(d, base, s, original):
    """Inverse frequencies and attention factors equal ROPE_INIT_FUNCTIONS's. HF forms base ** (2i/d) in float32:
    the exponent's rounding (2^-24 relative) grows by ln(base) in the power, so the frequencies agree to
    (ln base + 2) 2^-23 relative; the attention factors (Python floats) to float64 rounding."""
    transformers = pytest.importorskip(
        "transformers", reason="HF transformers is the oracle: pip install -c constraints.txt -e '.[oracle]'"
    )
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    for key, (scaling, max_positions, original_attr, seq_len, ours) in _hf_cases(d, base, s, original).items():
        config = _hf_config(transformers, d, base, scaling, max_positions, original_attr)
        inv, factor = ROPE_INIT_FUNCTIONS[scaling["rope_type"]](config, "cpu", seq_len)
        theirs = inv.double().numpy()
        assert theirs.shape == ours.inv_freq.shape, key
        # torch's float32 pow varies by an ulp between CPU kernels (ATen's vector widths): inside the bound's "+ 2"
        np.testing.assert_allclose(ours.inv_freq, theirs, rtol=(math.log(base) + 2) * 2**-23, atol=0, err_msg=key)
        # Python floats on both sides, math.log within an ulp on any libm: 1e-15 is 4.5 ulp
        assert float(factor) == pytest.approx(ours.attention_factor, rel=1e-15), key
