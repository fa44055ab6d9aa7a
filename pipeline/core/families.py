"""Every position-encoding family on equal terms, scored by pipeline.core.pe_properties: one dimension d
(relative.properties.d) for every analytic family, one temperature rule, one proximity P (N x N) per family, defined
here once (docs/science.md, "Position-encoding families side by side", repeats the formulas):

    nope                 P = 0; its prior uniform
    sinusoidal           P[i, j] = PE(i) . PE(j) = sum_k cos((i - j) w_k), w_k = base^(-2k/d), k < d/2, in closed form
                         (the interleaved and the concatenated layouts permute PE's columns: the same P, one row)
    random_init          P = X X^T of a seeded N x d table X ~ N(0, 0.02^2): BERT's initialiser, before any training
    rope_<scaling>       P[i, j] = E[a^2 q . R(i - j) q] = 2 a^2 sum_k cos((i - j) theta_k), q ~ N(0, I_d), exactly
                         (E|q_k|^2 = 2 per pair); theta and a from each scaling (pipeline.core.rope_scaling)
    rope_independent     P_s[i, j] = q_s . R(i - j) k_s of S seeded independent pairs q_s, k_s ~ N(0, I_d), each
                         pair scored, the scores averaged with their standard error (E P = 0: the expectation alone
                         is NoPE's)
    alibi_causal         P[i, j] = -m_h (i - j) for j <= i, -inf (masked) after; per head h, the scores averaged
    alibi_bidirectional  P[i, j] = -m_h |i - j|; per head, averaged
    minilm_l6_learned    P = T T^T of the first N rows of all-MiniLM-L6-v2's trained 512 x 384 position table
    minilm_l6_layer0     the model's layer-0 logits under identical word probing (pipeline.core.probing), per head
                         (12), the scores' mean and spread like every multi-head row
    minilm_l6_layer0_head_mean  the same probe's mean over the heads of the logits and of the attention, scored
                         as one matrix (its own row: averaging matrices first is another quantity)

The temperature rule: a dot-product proximity's prior is A = softmax(P / sqrt(d)), the attention's own scaling of
q . k at that d; ALiBi's bias is in logit units already (it is added to q . k / sqrt(d)): A = softmax(P), in closed
form (pipeline.core.alibi.prior); the probe's P are the model's own logits: A = softmax(P), per head and word.

Rows of several heads or samples give the scores' mean as the value: over heads with their sample "std", "min" and
"max", over samples with their "standard_error".
A cell is {"value": v} (v: the score, or that mean), or {"value": v,
"by_construction": true, "reason": ...} where the family's definition forces the score (checked: the computed
value must equal it within BY_CONSTRUCTION_TOLERANCE), or {"value": null, "reason": ...} where the property is
undefined for the family.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pipeline.core import pe_properties as pp

TEMPERATURE = "A = softmax(P / sqrt(d)) for a dot-product proximity; ALiBi's bias and the probe's logits: softmax(P)"
# a by-construction score computed from float64 sums: rounding moves it by ~1e-15, a broken claim by far more
BY_CONSTRUCTION_TOLERANCE = 1e-9
INIT_SCALE = 0.02  # the random table's N(0, 0.02^2): BERT's initializer_range (MiniLM's config.json too)

TOEPLITZ = "P depends on i - j only (Toeplitz): 1 by construction"
GRAM = "P = X X^T is symmetric (a Gram matrix): 1 by construction"
EVEN = "P(i - j) = P(j - i): A[i, i-k] = A[i, i+k] for every k: 1 by construction"
EVEN_WANG = "P(i - j) = P(j - i): P is symmetric: 1 by construction"
CONSTANT = "P is constant (0): no ranks, no variance to score"
UNIFORM = "uniform attention is symmetric: 1 by construction"
CAUSAL_WANG = "a causal mask leaves no pair (i, j), (j, i) with both entries defined"
CAUSAL_CHEN = (
    "a causal mask sets A[i, i+k] = 0: the score would compare weights with the mask's zeros, a measure of the mask "
    "(causal uniform attention scores 1), not of the encoding"
)
ALIBI_MONOTONE = "-m |i - j| falls strictly with the distance on every unmasked side: 1 by construction"


@dataclass(frozen=True)
class Family:
    """One row of the table. proximities, priors: (M, N, N), M = 1, or M heads (`over="heads"`: the scores' mean,
    sd, min and max), or M samples (`over="samples"`: the scores' mean and standard error)."""

    key: str
    label: str
    what: str
    d: int | None
    temperature: str
    proximities: np.ndarray
    priors: np.ndarray
    over: str = ""
    by_construction: dict[str, str] = field(default_factory=dict)
    undefined: dict[str, str] = field(default_factory=dict)


def cos_sum_proximity(inv_freq: np.ndarray, n: int, scale: float = 1.0) -> np.ndarray:
    """(n, n) scale * sum_k cos((i - j) theta_k), Toeplitz and exactly symmetric (pipeline.core.relative.cos_sum)."""
    from pipeline.core.relative import cos_sum

    return pp.toeplitz(scale * cos_sum(inv_freq, np.arange(-(n - 1), n, dtype=np.float64)), n)


def dot_prior(p: np.ndarray, d: int) -> np.ndarray:
    """The temperature rule of a dot-product proximity: softmax(P / sqrt(d)) over each row."""
    return pp.softmax_rows(p / math.sqrt(d))


def _one(p: np.ndarray, d: int) -> tuple[np.ndarray, np.ndarray]:
    return p[None], dot_prior(p, d)[None]


def analytic_families(rel: Any, n: int) -> list[Family]:
    """Every analytic family of the module doc at d = rel.properties.d over N = n positions; rel: the `relative`
    config (its rope.base, rope.scale, scaling, alibi.heads[0], properties)."""
    return [*_absolute_families(rel, n), *_rope_families(rel, n), *_alibi_families(rel, n)]


def _absolute_families(rel: Any, n: int) -> list[Family]:
    """NoPE, the sinusoid and an untrained random table."""
    from pipeline.core.random_tables import learned_position_table
    from pipeline.core.sinusoid import frequencies

    cfg = rel.properties
    d, base = cfg.d, rel.rope.base
    dot = f"softmax(P / sqrt({d}))"
    out = [
        Family(
            "nope",
            "NoPE",
            "NoPE: no position signal, P = 0; A uniform",
            None,
            "uniform",
            np.zeros((1, n, n)),
            np.full((1, n, n), 1.0 / n),
            undefined=dict.fromkeys(("wang_monotonicity", "wang_translation_invariance", "wang_symmetry"), CONSTANT),
            by_construction={"chen_symmetry": UNIFORM},
        )
    ]
    p = cos_sum_proximity(frequencies(d, base), n)
    out.append(
        Family(
            "sinusoidal",
            "sinusoidal",
            f"sinusoidal (any column layout): PE(i) . PE(j) = sum_k cos((i - j) w_k), w_k = {base:g}^(-2k/d)",
            d,
            dot,
            *_one(p, d),
            by_construction={
                "wang_translation_invariance": TOEPLITZ,
                "wang_symmetry": EVEN_WANG,
                "chen_symmetry": EVEN,
            },
        )
    )
    import torch

    table = learned_position_table(n, d, cfg.seed, init="normal", scale=INIT_SCALE, dtype=torch.float64).numpy()
    out.append(
        Family(
            "random_init",
            "random init",
            f"random init (untrained): X X^T, X ~ N(0, {INIT_SCALE:g}^2) seeded {cfg.seed} (BERT's initialiser)",
            d,
            dot,
            *_one(_gram(table), d),
            by_construction={"wang_symmetry": GRAM},
        )
    )
    return out


def _rope_families(rel: Any, n: int) -> list[Family]:
    """RoPE with k = q under each context-extension scaling, and RoPE with independent q, k."""
    from pipeline.core.relative import gaussian_pairs, rope_scores
    from pipeline.core.rope_scaling import scaled_frequencies

    cfg = rel.properties
    d, base = cfg.d, rel.rope.base
    dot = f"softmax(P / sqrt({d}))"
    out = []
    scalings = scaled_frequencies(rel.scaling, d, base, rel.rope.scale)
    for key, freq in scalings.items():
        a2 = freq.attention_factor * freq.attention_factor
        out.append(
            Family(
                f"rope_{key}",
                f"RoPE {key}" + (" (unverified)" if key == "longrope" and rel.scaling.longrope_long_factor else ""),
                f"RoPE {_scaling_text(key, rel)}, k = q: E[a^2 q . R(i - j) q] = 2 a^2 sum_k cos((i - j) theta_k), "
                f"a = {freq.attention_factor:.6g}",
                d,
                dot,
                *_one(cos_sum_proximity(freq.inv_freq, n, 2.0 * a2), d),
                by_construction={
                    "wang_translation_invariance": TOEPLITZ,
                    "wang_symmetry": EVEN_WANG,
                    "chen_symmetry": EVEN,
                },
            )
        )
    q, k = gaussian_pairs(cfg.samples, d, cfg.seed)
    default = scalings["default"]
    profiles = rope_scores(default.inv_freq, default.attention_factor, q, k, np.arange(-(n - 1), n, dtype=np.float64))
    samples = np.stack([pp.toeplitz(profile, n) for profile in profiles])
    out.append(
        Family(
            "rope_independent",
            "RoPE, q, k independent",
            f"RoPE default, independent q, k ~ N(0, I_d): q . R(i - j) k of {cfg.samples} seeded pairs (seed "
            f"{cfg.seed}), each scored; mean and standard error",
            d,
            dot,
            samples,
            dot_prior(samples, d),
            over="samples",
            by_construction={"wang_translation_invariance": TOEPLITZ},
        )
    )
    return out


def _alibi_families(rel: Any, n: int) -> list[Family]:
    """ALiBi's causal and bidirectional biases, with relative.alibi.heads[0] heads."""
    from pipeline.core import alibi

    out = []
    slopes = alibi.slopes(rel.alibi.heads[0]).tolist()
    for causal, key in ((True, "alibi_causal"), (False, "alibi_bidirectional")):
        bias = alibi.bias(alibi.slopes(len(slopes)), n, causal=causal).numpy()
        form = "-m (i - j) for j <= i, masked after" if causal else "-m |i - j|"
        out.append(
            Family(
                key,
                f"ALiBi {'causal' if causal else 'bidirectional'}",
                f"ALiBi {'causal' if causal else 'bidirectional'}: the bias {form}, {len(slopes)} heads, the scores' "
                "mean and spread over heads; A = softmax(bias) in closed form",
                None,
                "softmax(P)",
                bias,
                np.stack([alibi.prior(m, n, causal=causal) for m in slopes]),
                over="heads",
                by_construction={"wang_monotonicity": ALIBI_MONOTONE, "wang_translation_invariance": TOEPLITZ}
                | ({} if causal else {"wang_symmetry": EVEN_WANG, "chen_symmetry": EVEN}),
                undefined={"wang_symmetry": CAUSAL_WANG, "chen_symmetry": CAUSAL_CHEN} if causal else {},
            )
        )
    return out


def _gram(table: np.ndarray) -> np.ndarray:
    from pipeline.core.portable import exact_matmul

    return exact_matmul(table, table.T)


def _scaling_text(key: str, rel: Any) -> str:
    """The scaling's name in a row's description; LongRoPE's says whose factors it uses."""
    if key != "longrope":
        return key
    sc = rel.scaling
    if not sc.longrope_long_factor:
        return "longrope (illustrative factors s^(2i/(d-2)), no released model's)"
    return (
        f"longrope ({sc.longrope_source}'s factors, {sc.longrope_original_context:,} -> {sc.longrope_context:,} tokens; "
        "unverified: transcribed from that model's config.json, no revision recorded and no copy of the file ships "
        "with the project's packages to check them against)"
    )


def minilm_families(model: Any, n: int, words: np.ndarray) -> tuple[list[Family], np.ndarray, np.ndarray]:
    """The trained rows: the table's (d = 384) and layer 0's head mean under identical word probing with the word
    ids `words`; also the per-head (logits, attention), each (H, N, N). model: pipeline.inputs.minilm.MiniLM."""
    from pipeline.core.probing import probe

    table = model.position[:n].astype(np.float64)
    width = table.shape[1]
    logits, attention = probe(model, words, n)
    d_head = width // model.heads
    rows = [
        Family(
            "minilm_l6_learned",
            "MiniLM-L6 learned",
            f"all-MiniLM-L6-v2's trained position table (positions 0..{n - 1} of 512, d = {width}): T T^T",
            width,
            f"softmax(P / sqrt({width}))",
            *_one(_gram(table), width),
            by_construction={"wang_symmetry": GRAM},
        ),
        Family(
            "minilm_l6_layer0",
            "MiniLM-L6 layer 0",
            f"all-MiniLM-L6-v2 layer 0, identical word probing ({len(words)} words): q_i . k_j / sqrt({d_head}), "
            f"logits and attention averaged over the words; each of the {model.heads} heads scored, the scores' mean "
            "and spread over heads",
            d_head,
            "the model's softmax",
            logits,
            attention,
            over="heads",
        ),
        Family(
            "minilm_l6_layer0_head_mean",
            "MiniLM-L6 layer 0, heads' mean matrix",
            f"the same probe's logits and attention averaged over the {model.heads} heads first, then scored as one "
            "matrix (not a head's scores: averaging smooths each head's asymmetries and shifts)",
            d_head,
            "the model's softmax",
            logits.mean(axis=0)[None],
            attention.mean(axis=0)[None],
        ),
    ]
    return rows, logits, attention


def cells(family: Family) -> dict[str, dict]:
    """property -> cell (module doc) of one family."""
    wanted = [name for name in pp.PROPERTIES if name not in family.undefined]
    mono = pp.wang_monotonicity_many(family.proximities) if "wang_monotonicity" in wanted else None
    per_matrix = []
    for m, (p, a) in enumerate(zip(family.proximities, family.priors)):
        values = {
            "wang_monotonicity": None if mono is None else mono[m],
            "wang_translation_invariance": pp.wang_translation_invariance(p),
            "wang_symmetry": pp.wang_symmetry(p) if "wang_symmetry" in wanted else None,
            "chen_locality": pp.chen_locality(a),
            "chen_symmetry": pp.chen_symmetry(a) if "chen_symmetry" in wanted else None,
        }
        per_matrix.append(values)
    out = {}
    for name in pp.PROPERTIES:
        if name in family.undefined:
            out[name] = {"value": None, "reason": family.undefined[name]}
            continue
        values = [v[name] for v in per_matrix]
        if any(v is None for v in values):
            raise ValueError(f"{family.key}: {name} is undefined for one of its matrices; declare why (undefined)")
        cell: dict[str, Any] = {"value": float(np.mean(values))}
        if family.over == "samples":
            cell["standard_error"] = float(np.std(values, ddof=1) / math.sqrt(len(values)))
        elif family.over == "heads":
            cell |= {"std": float(np.std(values, ddof=1)), "min": float(min(values)), "max": float(max(values))}
        if name in family.by_construction:
            if abs(cell["value"] - 1.0) > BY_CONSTRUCTION_TOLERANCE:
                raise AssertionError(f"{family.key}: {name} = {cell['value']!r}, 1 by construction")
            cell.update(by_construction=True, reason=family.by_construction[name])
        out[name] = cell
    return out


def row(family: Family) -> dict:
    """The JSON row of one family: label, what, d, temperature, its cells (and the sample count)."""
    head = {"label": family.label, "what": family.what, "d": family.d, "temperature": family.temperature}
    if family.over:
        head[family.over] = int(family.proximities.shape[0])
    return head | cells(family)


def temperature_sensitivity(families: list[Family]) -> dict[str, dict[str, float]]:
    """Chen et al.'s locality of each dot-product family's proximity at T = 1, sqrt(d) and d: how much of its
    score the temperature alone sets."""
    out = {}
    for family in families:
        if not family.temperature.startswith("softmax(P / sqrt(") or family.over:
            continue
        p, d = family.proximities[0], family.d
        out[family.key] = {
            f"T={name}": pp.chen_locality(pp.softmax_rows(p / t))
            for name, t in (("1", 1.0), ("sqrt(d)", math.sqrt(d)), ("d", float(d)))
        }
    return out


def minilm_heads(logits: np.ndarray, attention: np.ndarray) -> dict:
    """Per head of the probe (H, N, N each): its scores (their spread: the minilm_l6_layer0 row)."""
    return {"per_head": {f"h{h + 1}": pp.scores(p, a) for h, (p, a) in enumerate(zip(logits, attention))}}


def table_scores(table: np.ndarray) -> dict[str, float | None]:
    """The scores of a position table's rows (N, d) as the minilm_l6_learned row scores its first N: T T^T and
    softmax(T T^T / sqrt(d))."""
    p = _gram(table.astype(np.float64))
    return pp.scores(p, dot_prior(p, table.shape[1]))
