"""RoPE and ALiBi (issue 14): every formula against an independent float64 implementation written here (numpy, explicit
rotation matrices and complex sums; the official ALiBi `get_slopes`), the values printed in the papers, the
relative-only (Toeplitz) structure checked numerically, and their part of the encode stage and its config."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
import torch

from conftest import params_for, run_stages
from pipeline.core import alibi, rope

RNG = np.random.default_rng(14)
EPS = np.finfo(np.float64).eps


# ---------------------------------------------------------------- independent references (numpy, float64)


def ref_theta(d: int, base: float) -> np.ndarray:
    """theta_i = base^(-2i/d) correctly rounded (mpmath at 120 bits), the same on every machine: a libm's pow may be an
    ulp off, and an ulp of theta_i moves the angle m theta_i by m ulp(theta_i), which the references below would
    carry into every rotation at long positions."""
    with mpmath.workprec(120):
        return np.array([float(mpmath.power(mpmath.mpf(base), mpmath.mpf(-2.0 * i / d))) for i in range(d // 2)])


def ref_rotation(m: float, d: int, base: float) -> np.ndarray:
    """(d, d) RoFormer's block-diagonal R_m (equation 15): a 2 x 2 rotation by m theta_i for pair (2i, 2i+1)."""
    R = np.zeros((d, d))
    for i, t in enumerate(ref_theta(d, base)):
        c, s = math.cos(m * t), math.sin(m * t)
        R[2 * i : 2 * i + 2, 2 * i : 2 * i + 2] = [[c, -s], [s, c]]
    return R


def ref_neox(x: np.ndarray, positions: np.ndarray, base: float) -> np.ndarray:
    """GPT-NeoX / LLaMA: emb = cat(freqs, freqs); x * cos(emb) + rotate_half(x) * sin(emb)."""
    d = x.shape[-1]
    inv_freq = 1.0 / base ** (np.arange(0, d, 2, dtype=np.float64) / d)
    freqs = np.outer(positions, inv_freq)
    emb = np.concatenate([freqs, freqs], axis=-1)
    x1, x2 = x[..., : d // 2], x[..., d // 2 :]
    rotate_half = np.concatenate([-x2, x1], axis=-1)
    return x * np.cos(emb) + rotate_half * np.sin(emb)


def rotation_bound(x: np.ndarray, m: np.ndarray, partner: np.ndarray) -> np.ndarray:
    """How far a rotation of x at positions m (shaped to broadcast against x, e.g. (n, 1)) may lie from a float64
    reference that takes numpy's power (ref_neox, as GPT-NeoX writes it); coordinate j turns with partner[j].

    Its angle m theta_i is off by (P + 2) eps m theta_i where numpy's power kernel on the machine is P ulp off (an
    ulp or two, SIMD or libm; then a division and a product), ours by an ulp; sin and cos add an ulp each. An output
    coordinate mixes x_j and its partner x_k: |error| <= ~4 eps (m + 1) (|x_j| + |x_k|) with theta_i <= 1. The
    bound is four times that: a wrong pair, sign or frequency is off by O(1), angles formed in float32 by ~1e-7 m."""
    return 16 * EPS * (m + 1) * (np.abs(x) + np.abs(x[..., partner]))


def ref_bound(delta: float, d: int, base: float) -> float:
    """(1/(d/2)) sum_{j=1}^{d/2} |S_j|, S_j = sum_{k=0}^{j-1} e^{i delta theta_k}, by plain Python sums."""
    theta = ref_theta(d, base)
    total, partial = 0.0, 0j
    for t in theta:
        partial += complex(math.cos(delta * t), math.sin(delta * t))
        total += abs(partial)
    return total / (d // 2)


def official_get_slopes(n):
    """ofirpress/attention_with_linear_biases, fairseq/models/transformer.py, verbatim."""

    def get_slopes_power_of_2(n):
        start = 2 ** (-(2 ** -(math.log2(n) - 3)))
        ratio = start
        return [start * ratio**i for i in range(n)]

    if math.log2(n).is_integer():
        return get_slopes_power_of_2(n)
    closest_power_of_2 = 2 ** math.floor(math.log2(n))
    return (
        get_slopes_power_of_2(closest_power_of_2)
        + official_get_slopes(2 * closest_power_of_2)[0::2][: n - closest_power_of_2]
    )


# ---------------------------------------------------------------- RoPE: the rotation


@pytest.mark.parametrize("d, base", [(8, 10000.0), (64, 10000.0), (128, 500000.0), (6, 10.0)])
def test_interleaved_rope_is_roformers_block_rotation(d, base):
    x = RNG.normal(size=(5, d))
    positions = np.array([0, 1, 7, 100, 4097])
    expected = np.stack([ref_rotation(m, d, base) @ x[i] for i, m in enumerate(positions)])
    got = rope.apply_rope(torch.from_numpy(x), torch.from_numpy(positions), base, layout="interleaved")
    # correctly rounded frequencies on both sides: Python's cos and sin (an ulp, by libm) and BLAS's two-term sums
    # differ by machine, ~1e-15 here
    np.testing.assert_allclose(got.numpy(), expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize("d, base", [(8, 10000.0), (128, 10000.0), (128, 500000.0)])
def test_half_split_rope_is_neox_rotate_half(d, base):
    x = RNG.normal(size=(2, 3, 50, d))  # (batch, heads, n, d)
    positions = np.arange(50) * 37
    got = rope.apply_rope(torch.from_numpy(x), torch.from_numpy(positions), base, layout="half_split")
    partner = (np.arange(d) + d // 2) % d  # pairs (i, i + d/2)
    assert (np.abs(got.numpy() - ref_neox(x, positions, base)) <= rotation_bound(x, positions[:, None], partner)).all()


def test_the_layouts_differ_by_a_fixed_permutation_of_coordinates():
    d = 16
    perm = torch.cat([torch.arange(0, d, 2), torch.arange(1, d, 2)])  # half-split column j: interleaved perm[j]
    x = torch.from_numpy(RNG.normal(size=(20, d)))
    inter = rope.apply_rope(x, layout="interleaved")
    half = rope.apply_rope(x[:, perm], layout="half_split")
    torch.testing.assert_close(half, inter[:, perm], rtol=0, atol=1e-13)  # ours on both sides: no machine spread
    assert not torch.allclose(rope.apply_rope(x, layout="half_split"), inter)  # not the same map


def test_rotation_keeps_norms_and_position_zero_is_identity():
    x = torch.from_numpy(RNG.normal(size=(300, 32)))
    for layout in rope.LAYOUTS:
        y = rope.apply_rope(x, layout=layout)
        # torch's norm (its reduction order varies by CPU) of 32 terms: within ~32 eps; a rotation off by an ulp a
        # coordinate moves it by ~eps; a wrong rotation by O(1)
        torch.testing.assert_close(y.norm(dim=-1), x.norm(dim=-1), rtol=1e-13, atol=0)
        torch.testing.assert_close(y[0], x[0], rtol=0, atol=0)


def test_angles_are_float64_rounded_once_at_long_positions():
    """cos/sin tables in float32 at positions up to 2^20 are the float64 values rounded once (within 1 float32
    ulp of numpy's float64 cos/sin, whose last bit may differ from torch's); angles formed in float32 are far off."""
    d, base = 128, 10000.0
    positions = np.arange(0, 2**20, 997)
    angle = np.outer(positions.astype(np.float64), ref_theta(d, base))
    cos32, sin32 = rope.angle_tables(torch.from_numpy(positions), d, base, dtype=torch.float32)
    for got, ref in ((cos32.numpy(), np.cos(angle)), (sin32.numpy(), np.sin(angle))):
        ulp = np.spacing(np.abs(ref).astype(np.float32))
        assert np.all(np.abs(got.astype(np.float64) - ref) <= ulp)
    naive = torch.cos(torch.from_numpy(positions).float()[:, None] * torch.from_numpy(ref_theta(d, base)).float())
    assert float(np.abs(naive.numpy() - np.cos(angle)).max()) > 1e-3  # what float32 angles would give


def test_rope_refuses_odd_dimensions_and_unknown_layouts():
    with pytest.raises(ValueError, match="even"):
        rope.apply_rope(torch.zeros(3, 7))
    with pytest.raises(ValueError, match="layout"):
        rope.apply_rope(torch.zeros(3, 8), layout="neox")


# ---------------------------------------------------------------- RoPE: scores depend only on m - n


@pytest.mark.parametrize("layout", rope.LAYOUTS)
@pytest.mark.parametrize("base, scale", [(10000.0, 1.0), (500000.0, 1.0), (10000.0, 4.0), (10.0, 1.0)])
def test_scores_depend_only_on_the_offset(layout, base, scale):
    d, n = 64, 200
    q, k = (torch.from_numpy(RNG.normal(size=d)) for _ in range(2))
    check = rope.score_check(q, k, n, base, layout=layout, position_scale=scale)
    size = float(check.closed.abs().max())
    # ours against ours (the same bits on every machine): sums of 32 rotated products, ~100 eps of the largest score
    assert float(check.spread.max()) < 1e-12 * size and float(check.error.max()) < 1e-12 * size
    # the check computed from independent float64 rotation matrices, for a few (m, n): Python's cos and sin (an ulp,
    # by libm) and BLAS's 64-term sums vary by machine, ~1e-14 on scores of size ~10
    if layout == "interleaved":
        for m, n_ in [(0, 0), (5, 2), (199, 3), (17, 150)]:
            ref = (ref_rotation(m / scale, d, base) @ q.numpy()) @ (ref_rotation(n_ / scale, d, base) @ k.numpy())
            assert abs(float(check.scores[m, n_]) - ref) < 1e-11


def test_closed_form_is_the_complex_sum():
    d, base = 32, 10000.0
    q, k = RNG.normal(size=d), RNG.normal(size=d)
    offsets = np.array([-300, -1, 0, 1, 2, 1000])
    qc, kc = q[0::2] + 1j * q[1::2], k[0::2] + 1j * k[1::2]
    expected = [np.real(np.sum(qc * np.conj(kc) * np.exp(1j * o * ref_theta(d, base)))) for o in offsets]
    got = rope.relative_scores(
        torch.from_numpy(q), torch.from_numpy(k), torch.from_numpy(offsets), base, layout="interleaved"
    )
    # correctly rounded frequencies; numpy's complex exp (its cos and sin an ulp, by machine) over 16 terms of size
    # ~1: the spread is ~1e-15
    np.testing.assert_allclose(got.numpy(), expected, rtol=0, atol=1e-12)


def test_float32_rotation_deviates_only_by_float32_rounding():
    d, n = 128, 256
    q, k = (torch.from_numpy(RNG.normal(size=d)) for _ in range(2))
    check = rope.score_check(q, k, n, layout="half_split", dtype=torch.float32)
    size = float(check.closed.abs().max())
    assert 0 < float(check.spread.max()) < 1e-5 * size  # float32 rounding: ~1e-7 relative a term, 64 terms


def test_the_offset_check_sees_a_score_that_depends_on_absolute_positions():
    """The spread over diagonals is not blind: a matrix that is not a function of m - n shows up."""
    n = 50
    m = torch.arange(n, dtype=torch.float64)
    toeplitz = torch.cos(0.3 * (m[:, None] - m[None, :]))
    hi, lo = rope.diagonals(toeplitz)
    assert float((hi - lo).max()) < 1e-14  # each diagonal holds one value computed once: it can only be exact
    absolute = torch.cos(0.3 * (m[:, None] ** 1.01 - m[None, :]))
    hi, lo = rope.diagonals(absolute)
    assert float((hi - lo).max()) > 0.1
    # and a sinusoid added to q and k (absolute, additive) is not relative-only either
    pe = torch.stack([torch.sin(m), torch.cos(m)], dim=1)
    q = torch.tensor([1.0, 2.0], dtype=torch.float64) + pe
    hi, lo = rope.diagonals(q @ (torch.tensor([0.5, -1.0], dtype=torch.float64) + pe).T)
    assert float((hi - lo).max()) > 0.1


# ---------------------------------------------------------------- RoPE: long-term decay and base scaling


def test_decay_bound_matches_the_plain_sum():
    d, base = 128, 10000.0
    distances = [0, 1, 2, 10, 100, 1000, 8192]
    got = rope.decay_bound(torch.tensor(distances), d, base).numpy()
    # correctly rounded frequencies; Python's cos and sin are within an ulp on any libm: 64 terms move a bound of 1
    # to 32 by ~1e-14 (an ulp of the frequencies would move it by up to ~1e-10 at distance 8192)
    np.testing.assert_allclose(got, [ref_bound(x, d, base) for x in distances], rtol=1e-12)
    assert got[0] == rope.decay_at_rest(d) == 32.5
    print("decay bound, d=128, base 10000, at distances", distances, ":", np.round(got, 4).tolist())


def test_position_interpolation_stretches_the_bound_s_times():
    d, base, s = 64, 10000.0, 4.0
    distances = torch.arange(0, 4000, 4)
    torch.testing.assert_close(
        rope.decay_bound(distances, d, base, position_scale=s),
        rope.decay_bound(distances // 4, d, base),
        rtol=1e-12,
        atol=0,
    )


def test_ntk_scaling_slows_the_lowest_frequency_by_s_and_keeps_the_highest():
    d, base, s = 128, 10000.0, 8.0
    new = rope.ntk_base(base, s, d)
    # Python's pow is within an ulp on any libm, ours correctly rounded, one product: 2 ulp apart at most, 1e-15 is
    # 4.5 (any other exponent is off by far more)
    assert new == pytest.approx(base * s ** (128 / 126), rel=1e-15)
    theta, scaled = ref_theta(d, base), ref_theta(d, new)
    assert scaled[0] == theta[0] == 1.0
    # the lowest frequency divided by s up to the roundings of two powers of exponents near 1 (~ln(base) eps)
    assert theta[-1] / scaled[-1] == pytest.approx(s, rel=1e-12)
    assert rope.lowest_wavelength(d, new) == pytest.approx(rope.lowest_wavelength(d, base, position_scale=s), rel=1e-12)
    assert rope.lowest_wavelength(d, base) == pytest.approx(2 * math.pi / theta[-1], rel=1e-12)


def test_larger_base_and_scalings_decay_later():
    """At long range the bound of a larger base, NTK and PI stays above the base's (the figure's message)."""
    d = 128
    distances = torch.tensor([100, 1000])
    bound = {
        v.key: rope.decay_bound(distances, d, v.base, position_scale=v.position_scale)
        for v in rope.scalings(10000.0, 500000.0, 4.0, d)
    }
    for key in ("larger_base", "ntk", "pi"):
        assert bool((bound[key] > bound["base"]).all()), key


# ---------------------------------------------------------------- ALiBi


def test_slopes_as_printed_in_the_paper():
    """Press et al., section 3: 8 heads 1/2^1 .. 1/2^8; 16 heads 1/2^0.5, 1/2^1, ..., 1/2^8."""
    assert alibi.slopes(8).tolist() == [2.0**-i for i in range(1, 9)]
    # 2^(-k/2): exact for even k, Python's pow (an ulp on any libm) against ours (correctly rounded) for odd k
    np.testing.assert_allclose(alibi.slopes(16).numpy(), [2.0 ** (-0.5 * i) for i in range(1, 17)], rtol=1e-15)


def test_slopes_for_twelve_heads():
    expected = [2.0**-i for i in range(1, 9)] + [2.0**-0.5, 2.0**-1.5, 2.0**-2.5, 2.0**-3.5]
    np.testing.assert_allclose(alibi.slopes(12).numpy(), expected, rtol=1e-15)  # as above: 1.5 ulp apart at most
    assert [str(e) for e in alibi.slope_exponents(12)][-4:] == ["-1/2", "-3/2", "-5/2", "-7/2"]


@pytest.mark.parametrize("heads", list(range(1, 65)) + [96, 100, 128, 255])
def test_slopes_match_the_official_get_slopes(heads):
    """Ours are one power of two each, correctly rounded; the official start * ratio**i compounds the rounding of
    `start` i times (1.2e-14 relative at 255 heads). With libm's pow within an ulp (2^-52 relative), the official
    slope i is off by at most (i + 1) 2^-52 (start's error, i times through ratio**i, once more in the product) plus
    pow's own and the product's rounding: below (heads + 2) 2^-52 for i < heads, on any machine. The bound is twice
    that; a wrong exponent is off by a factor of 2^(1/2) or more."""
    np.testing.assert_allclose(
        alibi.slopes(heads).numpy(), official_get_slopes(heads), rtol=2 * (heads + 2) * 2.0**-52, atol=0
    )


def test_bias_is_toeplitz_and_matches_the_official_form_under_softmax():
    """The official code adds m_h * j to every row (with the causal mask); ours adds -m_h (i - j). They differ by
    m_h i per row, which the softmax cancels."""
    heads, L = 12, 40
    m = alibi.slopes(heads)
    ours = alibi.bias(m, L)
    assert ours.shape == (heads, L, L) and alibi.toeplitz_deviation(ours) == 0.0
    i, j = np.arange(L)[:, None], np.arange(L)[None, :]
    expected = np.where(j <= i, -m.numpy()[:, None, None] * (i - j), -np.inf)
    np.testing.assert_array_equal(ours.numpy(), expected)
    official = m[:, None, None] * torch.arange(L, dtype=torch.float64)[None, None, :].expand(heads, L, L)
    official = official.masked_fill(torch.triu(torch.ones(L, L, dtype=torch.bool), 1), -torch.inf)
    scores = torch.from_numpy(RNG.normal(size=(heads, L, L)))
    # the two biases differ by a row constant: the sums score + bias round differently (by up to an ulp of 20, 4e-15),
    # which the softmax passes on relative to each weight (<= 1); torch's exp kernel (by CPU) adds an ulp
    torch.testing.assert_close(
        torch.softmax(scores + ours, -1), torch.softmax(scores + official, -1), rtol=0, atol=1e-14
    )


def test_bidirectional_bias_is_symmetric_and_the_toeplitz_check_can_fail():
    m = alibi.slopes(4)
    both = alibi.bias(m, 16, causal=False)
    assert torch.equal(both, both.transpose(1, 2)) and alibi.toeplitz_deviation(both) == 0.0
    broken = both.clone()
    broken[2, 5, 3] += 0.25
    assert alibi.toeplitz_deviation(broken) == pytest.approx(0.25)
    masked_once = alibi.bias(m, 8).clone()
    masked_once[0, 6, 2] = -torch.inf  # a -inf inside a finite diagonal
    assert alibi.toeplitz_deviation(masked_once) == math.inf


def test_penalty_and_half_weight_distance():
    m = alibi.slopes(8)
    k = torch.arange(0, 65)
    penalty = alibi.penalty(m, k)
    np.testing.assert_array_equal(penalty.numpy(), -np.outer(m.numpy(), k.numpy()))
    half = alibi.half_weight_distance(m)
    # ln 2 / m times m rounds twice, numpy's exp (an ulp or two by CPU) once more: a few ulp of 0.5, 1e-14 is 90
    np.testing.assert_allclose(np.exp(-m.numpy() * half.numpy()), 0.5, rtol=1e-14)


# ---------------------------------------------------------------- their part of the encode stage, and the config


@pytest.mark.slow
def test_relative_stage_writes_rope_and_alibi_arrays_and_numbers(tmp_path, small_store):
    from pipeline.base.files import read_json

    layout = run_stages(params_for("figures=none"), tmp_path, small_store, upto="encode")  # its data, not figures
    summary = read_json(layout.relative_metrics)
    rope_summary = summary["rope"]
    assert set(rope_summary["relative_only"]) == set(rope.LAYOUTS)
    for check in rope_summary["relative_only"].values():
        # float64: every diagonal is one value (portable arithmetic); float32: rounding of scores of size ~10
        assert check["float64_max_spread"] == 0.0 and 0 < check["float32_max_spread"] < 1e-4
    decay = rope_summary["decay_bound"]
    assert set(decay) == {"base", "larger_base", "ntk", "pi"}
    # the summary holds 12 significant digits (5e-12 relative); the reference is good to ~1e-14 on any machine
    assert decay["base"]["d100"] == pytest.approx(ref_bound(100, 128, 10000.0), rel=1e-10)
    # slopes below 1 written with 11 decimals: off by 5e-12 at most; the official ones are good to ~1e-15
    assert summary["alibi"]["heads"]["h12"]["slopes"] == pytest.approx(official_get_slopes(12), abs=1e-11)
    with np.load(layout.rope_arrays) as arrays:
        assert arrays["scores"].shape == (256, 256) and arrays["bound_pi"].shape == (8193,)
    with np.load(layout.alibi_arrays) as arrays:
        assert arrays["bias_h12"].shape == (12, 32, 32)


@pytest.mark.slow
def test_rope_and_alibi_outputs_are_the_same_bytes_twice(tmp_path, small_store):
    params = params_for("relative.rope.positions=64", "relative.rope.max_distance=1024", "figures=none")
    a = run_stages(params, tmp_path / "a", small_store, upto="encode")
    b = run_stages(params, tmp_path / "b", small_store, upto="encode")
    for name in ("rope_arrays", "alibi_arrays", "relative_metrics"):
        assert getattr(a, name).read_bytes() == getattr(b, name).read_bytes(), name


@pytest.mark.parametrize(
    "override, key",
    [
        ("relative.rope.d_head=7", "relative.rope.d_head"),
        ("relative.rope.larger_base=100", "relative.rope.larger_base"),
        ("relative.rope.scale=0.5", "relative.rope.scale"),
        ("relative.rope.layout=neox", "relative.rope.layout"),
        ("relative.rope.report_distances=[1,100000]", "relative.rope.report_distances"),
        ("relative.alibi.heads=[]", "relative.alibi.heads"),
        ("relative.alibi.heads=[0]", "relative.alibi.heads"),
        ("relative.alibi.length=1", "relative.alibi.length"),
        ("relative.properties.d=7", "relative.properties.d"),
        ("relative.properties.d=64", "relative.scaling.longrope_long_factor"),  # Phi-3-medium's 64 factors: d 128
        ("relative.scaling.longrope_context=1024", "relative.scaling.longrope_context"),
    ],
)
def test_relative_config_rules_name_the_key(override, key):
    from pipeline.base.errors import PipelineError

    with pytest.raises(PipelineError) as err:
        params_for(override)
    assert key in str(err.value)


def test_schema_layouts_are_ropes():
    from pipeline.config import schema

    assert schema.ROPE_LAYOUTS == rope.LAYOUTS
