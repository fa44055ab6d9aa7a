"""The families table (pipeline.core.families) on equal terms: each family's proximity against an independent
computation written here (the encoding module's sinusoid table and a plain matrix product, large-sample estimates,
the softmax of ALiBi's bias), the equal-terms claim, cells that hold by construction or are undefined, and the
table the encode stage writes."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from conftest import params_for, run_stages, typed
from pipeline.core import alibi, families
from pipeline.core import pe_properties as pp
from pipeline.core.relative import cos_sum, gaussian_pairs, rope_independent_std, rope_scores, rope_self_expectation
from pipeline.core.rope_scaling import default_frequencies

D, N = 128, 64


def sinusoid_gram(layout: str, n: int = N, d: int = D) -> np.ndarray:
    """PE . PE^T of the encoding module's own float64 table (numpy's matmul: an independent path)."""
    from pipeline.core.encoding import sinusoidal_encoding

    pe = sinusoidal_encoding(n, d, 10000.0, layout=layout, dtype=torch.float64).numpy()
    return pe @ pe.T


def test_sinusoid_closed_form_is_the_tables_dot_product_in_both_layouts():
    """sum_k cos((i - j) w_k) against PE . PE^T of the interleaved and the concatenated tables: equal to float64
    rounding of d/2 products of magnitude 1 (|P| <= 64: 1e-12 absolute is a few hundred ulp); the two layouts give
    the same P (a column permutation), which is why they are one row."""
    closed = families.cos_sum_proximity(default_frequencies(D, 10000.0), N)
    for layout in ("interleaved", "concatenated"):
        np.testing.assert_allclose(closed, sinusoid_gram(layout), rtol=0, atol=1e-12)
    np.testing.assert_allclose(sinusoid_gram("interleaved"), sinusoid_gram("concatenated"), rtol=0, atol=1e-12)
    assert np.array_equal(closed, closed.T)  # exactly symmetric: built from |i - j|


def test_equal_terms_rope_with_k_equal_q_is_twice_the_sinusoid():
    """At equal d and base, RoPE's exact expectation with k = q is 2 x the sinusoid's PE . PE^T (the encoding's own
    table), so their Wang et al. scores are equal (they depend on ranks and shares only), and their Chen et al.
    scores differ by the temperature alone: the sinusoid's at T = sqrt(d) / 2 equals RoPE's at sqrt(d)."""
    theta = default_frequencies(D, 10000.0)
    rope = pp.toeplitz(rope_self_expectation(theta, 1.0, np.arange(-(N - 1), N, dtype=float)), N)
    sinusoid = sinusoid_gram("interleaved")
    np.testing.assert_allclose(rope, 2 * sinusoid, rtol=0, atol=2e-12)  # twice the tolerance above
    assert pp.wang_monotonicity(rope) == pytest.approx(pp.wang_monotonicity(sinusoid), abs=1e-12)
    assert pp.wang_monotonicity(rope) == pytest.approx(0.98588, abs=1e-5)  # the equal-d value
    sharper = pp.chen_locality(pp.softmax_rows(sinusoid / (math.sqrt(D) / 2)))
    assert pp.chen_locality(families.dot_prior(rope, D)) == pytest.approx(sharper, abs=1e-12)


def test_rope_closed_form_against_a_large_sample():
    """E[a^2 sum_i |q_i|^2 cos(delta theta_i)] over 100,000 seeded q: the sample mean lies within 5 of its standard
    errors of the closed form at every offset (the standard error is the sample's, per offset; 5 SE two-sided is
    a 6e-7 chance per offset for a correct closed form, and the draw is seeded)."""
    d, a = 32, 1.3
    theta = default_frequencies(d, 10000.0)
    offsets = np.arange(0, 40, dtype=float)
    q, _ = gaussian_pairs(100_000, d, 11)
    power = (q.real**2 + q.imag**2) * a * a  # (S, d/2)
    samples = power @ np.cos(offsets[:, None] * theta[None, :]).T  # (S, K), numpy: an independent path
    error = samples.std(axis=0, ddof=1) / math.sqrt(len(samples))
    closed = rope_self_expectation(theta, a, offsets)
    assert np.all(np.abs(samples.mean(axis=0) - closed) < 5 * error)
    assert closed[0] == pytest.approx(a * a * d, rel=1e-15)  # E|q|^2 = d


def test_independent_scores_have_mean_zero_and_std_a2_sqrt_d():
    """The score of independent q, k: mean 0 and standard deviation a^2 sqrt(d) at every offset, against 40,000
    seeded pairs: the mean within 5 standard errors of 0, the standard deviation within 5 of its own standard errors
    (sqrt(Var(s^2)) / (2 sigma sqrt(S)), Var(s^2) from the sample's fourth moment)."""
    d, a = 64, 1.1
    theta = default_frequencies(d, 500000.0)
    q, k = gaussian_pairs(40_000, d, 5)
    offsets = np.array([0.0, 1.0, 7.0, 300.0, 5000.0])
    s = rope_scores(theta, a, q, k, offsets)
    sigma = rope_independent_std(a, d)
    assert np.all(np.abs(s.mean(axis=0)) < 5 * s.std(axis=0) / math.sqrt(len(s)))
    spread = np.sqrt(((s**2 - sigma**2) ** 2).mean(axis=0)) / (2 * sigma * math.sqrt(len(s)))
    assert np.all(np.abs(s.std(axis=0) - sigma) < 5 * spread)


def test_rope_scores_are_the_complex_sum():
    """rope_scores against Re sum_i q_i conj(k_i) e^{i delta theta_i} in complex arithmetic (numpy)."""
    d = 16
    theta = default_frequencies(d, 10000.0)
    q, k = gaussian_pairs(7, d, 2)
    offsets = np.array([-5.0, 0.0, 3.0, 250.0])
    expected = np.real((q * np.conj(k)) @ np.exp(1j * offsets[:, None] * theta[None, :]).T) * 1.5**2
    np.testing.assert_allclose(rope_scores(theta, 1.5, q, k, offsets), expected, rtol=0, atol=1e-12)


def test_cos_sum_is_even_to_the_bit():
    theta = default_frequencies(64, 10000.0)
    values = cos_sum(theta, np.arange(-50, 51, dtype=float))
    assert np.array_equal(values, values[::-1])


@pytest.mark.parametrize("causal", [True, False])
def test_alibi_closed_form_is_the_softmax_of_the_bias(causal):
    """The geometric closed form of each head's prior against the row softmax of its bias (1e-14: the closed form's
    1 - r cancels, r = e^-m up to 0.996 for 8 heads); its locality against the authors' loops on that softmax."""
    from test_pe_properties import authors_locality

    n = 48
    slopes = alibi.slopes(8)
    biases = alibi.bias(slopes, n, causal=causal).numpy()
    for m, b in zip(slopes.tolist(), biases):
        softmax = np.exp(b - b.max(axis=1, keepdims=True))
        softmax /= softmax.sum(axis=1, keepdims=True)
        np.testing.assert_allclose(alibi.prior(m, n, causal=causal), softmax, rtol=0, atol=1e-14)
        assert alibi.locality(m, n, causal=causal) == pytest.approx(authors_locality(softmax), rel=1e-13)


@pytest.fixture(scope="module")
def rows() -> dict[str, families.Family]:
    cfg = typed(params_for("relative.properties.positions=16", "relative.properties.samples=24"))
    return {family.key: family for family in families.analytic_families(cfg.relative, 16)}


def test_one_row_per_family_at_one_d(rows):
    assert list(rows) == [
        "nope",
        "sinusoidal",
        "random_init",
        *(f"rope_{key}" for key in ("default", "linear", "ntk", "dynamic", "yarn", "llama3", "longrope")),
        "rope_independent",
        "alibi_causal",
        "alibi_bidirectional",
    ]
    assert {row.d for row in rows.values()} == {None, D}  # NoPE and ALiBi have no d
    assert "Phi-3-medium-128k-instruct" in rows["rope_longrope"].what
    # no copy of that model's config.json ships here to check the factors against: the row says so (issue 45)
    assert rows["rope_longrope"].label == "RoPE longrope (unverified)" and "unverified" in rows["rope_longrope"].what


def test_random_init_is_berts_initialiser(rows):
    """X X^T of an N x d table of N(0, 0.02^2): its diagonal (|X_i|^2) averages about d 0.02^2 = 0.0512."""
    p = rows["random_init"].proximities[0]
    assert np.diagonal(p).mean() == pytest.approx(D * families.INIT_SCALE**2, rel=0.1)  # 16 x 128 draws: ~3% sd


def test_cells_mark_by_construction_and_undefined(rows):
    cells = {key: families.cells(row) for key, row in rows.items()}
    assert cells["nope"]["wang_monotonicity"] == {"value": None, "reason": families.CONSTANT}
    assert cells["alibi_causal"]["wang_symmetry"]["value"] is None
    assert cells["alibi_causal"]["chen_symmetry"] == {"value": None, "reason": families.CAUSAL_CHEN}
    assert cells["alibi_bidirectional"]["chen_symmetry"]["by_construction"] is True
    for key in ("sinusoidal", "rope_default", "rope_longrope"):
        assert cells[key]["wang_translation_invariance"]["by_construction"] is True
        assert "by_construction" not in cells[key]["wang_monotonicity"]
    assert cells["random_init"]["wang_symmetry"]["by_construction"] is True
    assert "by_construction" not in cells["random_init"]["wang_translation_invariance"]
    assert set(cells["sinusoidal"]["chen_locality"]) == {"value"}  # a measured score: its value alone


def test_a_false_claim_by_construction_fails(rows):
    """A family whose cell is claimed by construction but computes otherwise is a bug, not a row."""
    import dataclasses

    wrong = dataclasses.replace(rows["random_init"], by_construction={"wang_translation_invariance": "claimed"})
    with pytest.raises(AssertionError, match="wang_translation_invariance"):
        families.cells(wrong)


def test_sampled_row_reports_the_mean_and_its_standard_error(rows):
    """rope_independent: each pair's scores, then their mean and std / sqrt(S), against a loop over the pairs."""
    row = rows["rope_independent"]
    per_pair = [pp.scores(p, a) for p, a in zip(row.proximities, row.priors)]
    cells = families.cells(row)
    for name in ("wang_monotonicity", "wang_symmetry", "chen_locality", "chen_symmetry"):
        values = np.array([s[name] for s in per_pair])
        assert cells[name]["value"] == pytest.approx(values.mean(), rel=1e-12)
        assert cells[name]["standard_error"] == pytest.approx(values.std(ddof=1) / math.sqrt(len(values)), rel=1e-9)


def test_every_multi_head_row_gives_the_mean_and_spread_of_its_heads_scores(rows):
    """ALiBi's rows: each head scored alone (pe_properties.scores), then their mean, sample sd, min and max: one way
    of combining heads for every multi-head row (MiniLM's layer 0 too: tests/test_minilm.py)."""
    row = rows["alibi_bidirectional"]
    per_head = [pp.scores(p, a) for p, a in zip(row.proximities, row.priors)]
    cells = families.cells(row)
    values = np.array([s["chen_locality"] for s in per_head])
    assert row.over == "heads" and len(per_head) == 8 and values.std() > 0.01
    assert cells["chen_locality"]["value"] == pytest.approx(values.mean(), rel=1e-12)
    assert cells["chen_locality"]["std"] == pytest.approx(values.std(ddof=1), rel=1e-9)
    assert (cells["chen_locality"]["min"], cells["chen_locality"]["max"]) == (values.min(), values.max())
    assert cells["wang_monotonicity"]["by_construction"] and cells["wang_monotonicity"]["std"] == 0.0


def test_temperature_sets_chen_locality(rows):
    """The same sinusoid scores 0.89 at T = 1 and 0.05 at T = d (N = 16): the temperature rule is part of the
    score, so the table states one."""
    spread = families.temperature_sensitivity(list(rows.values()))["sinusoidal"]
    assert spread["T=1"] > spread["T=sqrt(d)"] > spread["T=d"] > 1 / 16
    assert "rope_independent" not in families.temperature_sensitivity(list(rows.values()))


def test_the_relative_stage_writes_the_table(tmp_path, small_store):
    """reports/properties.json: one d and temperature rule, every family's cells; the MiniLM rows exactly when the
    optional extra is installed; the same bytes twice."""
    from pipeline.base.files import read_json
    from pipeline.inputs.minilm import find_model

    params = params_for("relative.properties.positions=12", "relative.properties.samples=8", "figures=none")
    a = run_stages(params, tmp_path / "a", small_store, upto="encode")
    b = run_stages(params, tmp_path / "b", small_store, upto="encode")
    summary = read_json(a.properties_metrics)
    assert summary["d"] == D and summary["positions"] == 12 and "softmax(P / sqrt(d))" in summary["temperature"]
    installed = find_model()[0] is not None
    assert ("minilm_l6_learned" in summary["families"]) == installed == a.minilm_arrays.exists()
    for row in summary["families"].values():
        assert set(pp.PROPERTIES) <= set(row) and {"label", "what", "d", "temperature"} <= set(row)
    for name in ("properties_metrics", "scaling_arrays", *(["minilm_arrays"] if installed else [])):
        assert getattr(a, name).read_bytes() == getattr(b, name).read_bytes(), name


def test_without_the_model_the_rows_are_absent_and_the_log_says_why(tmp_path, small_store, monkeypatch, pipeline_log):
    """A run where the model's package cannot be found (its import name replaced by one that does not exist): no
    MiniLM rows, no minilm.npz, one log line naming the extra to install."""
    from pipeline.base.files import read_json
    from pipeline.inputs import minilm

    monkeypatch.setattr(minilm, "PACKAGE", "no_such_package_pe_pipeline")
    layout = run_stages(params_for("relative.properties.positions=12", "figures=none"), tmp_path, small_store, "encode")
    summary = read_json(layout.properties_metrics)
    assert not any(key.startswith("minilm") for key in summary["families"]) and "minilm" not in summary
    assert not layout.minilm_arrays.exists()
    lines = [r.getMessage() for r in pipeline_log.records if "MiniLM" in r.getMessage()]
    assert len(lines) == 1 and ".[models]" in lines[0]
