"""The sweep: W1 * word_embedding + W2 * positional_encoding for every weight pair and every sentence, projected
to 2-D with PCA and measured (pipeline.core.metrics); arrays and dicts in, arrays and dicts out, no files.

Per sentence three batches of weights go through one batched PCA: the configured pairs (baseline W1=1, W2=0
first), the Transformer's scaling W1 = sqrt(d), W2 = 1, and the ratio grid W1 = 1, W2 = r. Projections are
rounded to SIGNIFICANT_DIGITS of each frame's largest coordinate before anything is measured or saved, so that
metrics, files and figures agree and do not change with the CPU's summation order. The metrics of the whole
batch are computed at once too (pipeline.core.metrics.batch_metrics, in chunks of bounded memory).

The crossover r* is exact: wherever the k-NN curves switch between two grid ratios, the switch is located by
bisection on r to a relative 1e-9, evaluating the d-dimensional k-NN metrics at the new ratios (they need no
projection). The grid stays for the curves.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from pipeline.base.files import round_significant
from pipeline.base.progress import Progress
from pipeline.base.trees import flatten
from pipeline.core.metrics import (
    Reference,
    batch_metrics,
    crossover,
    knn_scores,
    pairwise_distances,
    positional_wins,
    procrustes_disparities,
    switch_points,
    valid_neighbours,
)
from pipeline.core.weights import WeightPair, weight_pairs


# metrics.json's transformer_scaling.s{i}: the metrics reported at the paper's scaling
SCALING_METRICS = ("knn_semantic_hd", "knn_positional_hd", "trustworthiness_2d", "pca_disparity")
# Weightings measured at once: the pairwise differences of a chunk, (chunk, n, n, d) float64, stay near this size.
CHUNK_BYTES = 64 * 2**20


@dataclass(frozen=True)
class SentenceSweep:
    """One sentence of n words through the sweep (P configured pairs, m ratios)."""

    coords: np.ndarray  # (P, n, 2) projections of the configured pairs, baseline first
    explained: np.ndarray  # (P, 2) explained variance ratios
    grid_coords: np.ndarray  # (m, n, 2) projections along the ratio grid
    grid_explained: np.ndarray  # (m, 2)
    pairs: dict[str, dict[str, float]]  # pair label -> metric -> value
    curves: dict[str, np.ndarray]  # metric -> (m,) values along the ratio grid
    crossover: dict  # r_star (None: beyond the grid), log10_r_star, neighbours, switch_points
    scaling: dict  # SCALING_METRICS at W1 = sqrt(d), W2 = 1, and semantic_dominates


@dataclass(frozen=True)
class Sweep:
    d_model: int
    pairs: list[WeightPair]
    ratios: np.ndarray  # (m,) r = W2 / W1 of the grid
    sentences: list[SentenceSweep]

    @property
    def scaling_ratio(self) -> float:
        """r = W2 / W1 at the Transformer's scaling: 1 / sqrt(d)."""
        return 1 / math.sqrt(self.d_model)


def ratio_grid(cfg: Any) -> np.ndarray:
    """(points,) r = W2 / W1 values, log-spaced from sweep.ratios.min to sweep.ratios.max."""
    return np.logspace(np.log10(cfg.min), np.log10(cfg.max), cfg.points)


def transformer_pair(d_model: int) -> WeightPair:
    """The paper's scaling: embeddings * sqrt(d_model), positional encodings * 1."""
    return WeightPair(math.sqrt(d_model), 1.0, "sqrt_d", "1")


def grid_pairs(ratios: np.ndarray) -> list[WeightPair]:
    return [WeightPair(1.0, float(r), "1", repr(float(r))) for r in ratios]


def project(
    e: np.ndarray, p: np.ndarray, pairs: Sequence[WeightPair], n_components: int = 2, device="cpu"
) -> tuple[np.ndarray, np.ndarray]:
    """PCA of W1 * e + W2 * p for every pair at once (pipeline.core.projection.weighted_pca: one batched eigh
    of the pairs' n x n Gram matrices), as scikit-learn's PCA gives it, signs included.

    e, p: (n, d) embeddings and encodings of one sentence. Returns coords (pairs, n, k) rounded to
    SIGNIFICANT_DIGITS of each frame's largest coordinate, and explained variance ratios (pairs, k) rounded
    to SIGNIFICANT_DIGITS of 1, both float64.
    """
    import torch

    from pipeline.core.projection import weighted_pca

    coords, ratio = weighted_pca(
        torch.as_tensor(e, device=device),
        torch.as_tensor(p, device=device),
        [pair.w1 for pair in pairs],
        [pair.w2 for pair in pairs],
        n_components=n_components,
    )
    coords, ratio = coords.cpu().double().numpy(), ratio.cpu().double().numpy()
    frame_scale = np.abs(coords).max(axis=(1, 2), keepdims=True)
    return round_significant(coords, floor=frame_scale), round_significant(ratio, floor=1.0)


def measure(
    pairs: Sequence[WeightPair], coords: np.ndarray, explained: np.ndarray, baseline: np.ndarray, ref: Reference
) -> dict[str, np.ndarray]:
    """Every metric of B weightings of one sentence, each a (B,) array: coords (B, n, 2) their projections,
    explained (B, 2), baseline (n, 2) the pure-embedding projection, ref the sentence's references (e, p (n, d))."""
    w1 = np.array([pair.w1 for pair in pairs])[:, None, None]
    w2 = np.array([pair.w2 for pair in pairs])[:, None, None]
    n, d = ref.e.shape
    step = max(1, CHUNK_BYTES // (8 * n * n * max(d, 2)))
    parts = [
        batch_metrics(w1[a : a + step] * ref.e + w2[a : a + step] * ref.p, coords[a : a + step], ref)
        for a in range(0, len(pairs), step)
    ]
    values = {key: np.concatenate([part[key] for part in parts]) for key in parts[0]}
    baseline_rows = np.array([pair.is_baseline for pair in pairs])
    values["pca_disparity"] = np.where(baseline_rows, 0.0, procrustes_disparities(baseline, coords))
    values["explained_variance_2d"] = explained.sum(axis=-1)
    return values


def positional_wins_at(ref: Reference):
    """wins(r): True when, at W1 = 1, W2 = r, positional neighbours (d-dimensional k-NN) are at least as many as
    semantic ones; computed exactly as the grid's points are."""

    def wins(r: float) -> bool:
        semantic, positional = knn_scores(pairwise_distances((1.0 * ref.e + r * ref.p)[None]), ref)
        return bool(positional_wins(semantic, positional)[0])

    return wins


def exact_crossover(ratios: np.ndarray, curves: dict[str, np.ndarray], ref: Reference) -> dict:
    """metrics.json's crossover.s{i}: r_star (None: positional neighbours never win on the grid; the grid's first
    ratio: they already win there), log10_r_star, neighbours (k), and switch_points {"0": {"r", "to"}, ...}: every
    switch the grid brackets, located to a relative 1e-9, "to" the side that wins after it (position/meaning)."""
    wins_on_grid = positional_wins(curves["knn_semantic_hd"], curves["knn_positional_hd"])
    switches = switch_points(ratios, wins_on_grid, positional_wins_at(ref))
    r_star = crossover(ratios, wins_on_grid, switches)
    return {
        "r_star": r_star,
        "log10_r_star": None if r_star is None else math.log10(r_star),
        "neighbours": ref.k,
        "switch_points": {
            str(i): {"r": r, "to": "position" if state else "meaning"} for i, (r, state) in enumerate(switches)
        },
    }


def sweep_sentence(
    e: np.ndarray,
    p: np.ndarray,
    words: Sequence[str],
    pairs: list[WeightPair],
    ratios: np.ndarray,
    d_model: int,
    groups: Sequence[Sequence[str]],
    neighbours: int,
    n_components: int = 2,
    device="cpu",
) -> SentenceSweep:
    """The sweep of one sentence: e, p (n, d) float64 word embeddings and positional encodings of its words."""
    ref = Reference(e, p, words, groups, valid_neighbours(neighbours, len(words)))
    scaling_pair, grid = transformer_pair(d_model), grid_pairs(ratios)
    batch = pairs + [scaling_pair] + grid
    coords, explained = project(e, p, batch, n_components, device)
    values = measure(batch, coords, explained, coords[0], ref)
    n_pairs = len(pairs)
    rows = [{key: float(column[j]) for key, column in values.items()} for j in range(n_pairs + 1)]
    curves = {key: column[n_pairs + 1 :] for key, column in values.items()}
    at_scaling = rows[n_pairs]
    scaling = {key: at_scaling[key] for key in SCALING_METRICS}
    scaling["semantic_dominates"] = float(at_scaling["knn_semantic_hd"] > at_scaling["knn_positional_hd"])
    return SentenceSweep(
        coords=coords[:n_pairs],
        explained=explained[:n_pairs],
        grid_coords=coords[n_pairs + 1 :],
        grid_explained=explained[n_pairs + 1 :],
        pairs={pair.label: rows[j] for j, pair in enumerate(pairs)},
        curves=curves,
        crossover=exact_crossover(ratios, curves, ref),
        scaling=scaling,
    )


def run_sweep(
    tokens: dict,
    embeddings: np.ndarray,
    pe: np.ndarray,
    d_model: int,
    sweep_cfg: Any,
    metrics_cfg: Any,
    device="cpu",
) -> Sweep:
    """Every sentence of tokens.json through the sweep.

    embeddings: (V + 1, d) rows by word index; pe: (max_len, d) (a memory map is fine: only the sentences'
    positions are read); sweep_cfg, metrics_cfg: the `sweep` and `metrics` configs.
    """
    pairs = weight_pairs(sweep_cfg.w1, sweep_cfg.w2, d_model=d_model)
    ratios = ratio_grid(sweep_cfg.ratios)
    sentences = []
    progress = Progress("sweep: sentences", len(tokens["ids"]))
    for ids, positions, words in zip(tokens["ids"], tokens["positions"], tokens["words"]):
        e = np.asarray(embeddings[ids], dtype=np.float64)
        p = np.asarray(pe[positions], dtype=np.float64)
        sentences.append(
            sweep_sentence(
                e,
                p,
                words,
                pairs,
                ratios,
                d_model,
                metrics_cfg.groups,
                metrics_cfg.neighbours,
                sweep_cfg.n_components,
                device,
            )
        )
        progress.update(len(sentences))
    return Sweep(d_model, pairs, ratios, sentences)


def metrics(sweep: Sweep, encoded_metrics: dict) -> dict:
    """reports/metrics.json: encoded_metrics (pipeline.core.encode.summary_metrics: encoding, embedding), then
    per sentence s{i} the pairs' metrics, the crossover and the Transformer scaling. NaN (a metric undefined
    here, e.g. no semantic group in the sentence) becomes None (JSON null)."""
    scaling: dict = {"r": sweep.scaling_ratio}
    scaling.update({f"s{s}": sentence.scaling for s, sentence in enumerate(sweep.sentences)})
    return _finite(
        {
            **encoded_metrics,
            "sweep": {f"s{s}": sentence.pairs for s, sentence in enumerate(sweep.sentences)},
            "crossover": {f"s{s}": sentence.crossover for s, sentence in enumerate(sweep.sentences)},
            "transformer_scaling": scaling,
        }
    )


# reports/headline.json: name -> where its value comes from in metrics.json ({s} stands for each sentence s{i})
HEADLINE = {
    "r_star.{s}": "crossover.{s}.r_star",  # W2/W1 where position overtakes meaning
    "sqrt_d_semantic.{s}": "transformer_scaling.{s}.semantic_dominates",  # 1: meaning still wins at W1=sqrt(d), W2=1
    "pe_norm_dev_1e-9": "encoding.norm_max_abs_dev",  # property 1: max |norm - sqrt(d/2)|
    "pe_offset_spread_1e-9": "encoding.offset_distance_max_spread",  # property 2: distance depends on offset only
    "oov_count": "embedding.oov_count",
    # only when the texts hold more sentences than metrics.json lists one by one (its `sentences` block)
    "sentences": "sentences.count",
    "r_star.median": "sentences.r_star_median",
    "r_star.beyond_grid": "sentences.r_star_beyond_grid",
    "sqrt_d_semantic.share": "sentences.sqrt_d_semantic_share",
}
# metrics.json's groups that hold one entry per sentence (s{i}); transformer_scaling also holds r
PER_SENTENCE = ("sweep", "crossover", "transformer_scaling")
# the unit a headline value is written in (its name says it): DVC prints 5 decimals, so 4.837e-08 would show 0.0
UNITS = {"pe_norm_dev_1e-9": 1e-9, "pe_offset_spread_1e-9": 1e-9}


def headline(metrics: dict) -> dict:
    """reports/headline.json, the DVC metric of the pipeline (what `dvc exp show` and `dvc metrics show/diff`
    print): the few numbers of `metrics` (metrics.json, the summary) in HEADLINE, under short names so
    that the table stays narrow; a tiny value in the unit its name ends with (UNITS: pe_norm_dev_1e-9 48.37 is
    4.837e-08). Flat: {"r_star.s0": ..., ..., "oov_count": ...}; a name whose source metrics.json lacks is left
    out."""

    def value(path: str):
        node = metrics
        for key in path.split("."):
            node = node[key]
        return node

    sentences = sorted(metrics["crossover"], key=lambda s: int(s[1:]))
    flat = {}
    for name, path in HEADLINE.items():
        if path.split(".")[0] not in metrics:
            continue
        for s in sentences if "{s}" in name else [None]:
            flat[name.format(s=s)] = value(path.format(s=s))
    for name, unit in UNITS.items():
        flat[name] = float(round_significant(flat[name] / unit))
    return flat


def summary(metrics: dict, listed: int) -> dict:
    """reports/metrics.json (in git, so small for any number of sentences): `metrics` (the full tree) with the
    per-sentence entries of the first `listed` sentences only (those with figures: figures.max_sentences); when
    the texts hold more, a `sentences` block summarises all of them: count, listed, r* median / min / max and
    how many lie beyond the grid, and the share of sentences where meaning still wins at W1 = sqrt(d), W2 = 1.
    Every sentence's metrics are in reports/sentences.csv (sentence_table)."""
    keep = {f"s{s}" for s in range(listed)}
    out = {
        group: {k: v for k, v in node.items() if k in keep or not k.startswith("s")} if group in PER_SENTENCE else node
        for group, node in metrics.items()
    }
    count = len(metrics["crossover"])
    if count <= listed:
        return out
    r_stars = sorted(c["r_star"] for c in metrics["crossover"].values() if c["r_star"] is not None)
    semantic = [v["semantic_dominates"] for k, v in metrics["transformer_scaling"].items() if k != "r"]
    out["sentences"] = {
        "count": count,
        "listed": listed,
        "r_star_median": float(np.median(r_stars)) if r_stars else None,
        "r_star_min": r_stars[0] if r_stars else None,
        "r_star_max": r_stars[-1] if r_stars else None,
        "r_star_beyond_grid": count - len(r_stars),
        "sqrt_d_semantic_share": sum(semantic) / len(semantic),
    }
    return out


def sentence_table(metrics: dict) -> dict[str, list]:
    """reports/sentences.csv, one row per sentence of the full metrics tree: sentence, its crossover (r_star,
    log10_r_star, neighbours, switch_points as `r:side` pairs), its metrics at the Transformer's scaling
    (scaling.<metric>) and every weight pair's metrics (<pair>.<metric>); as columns for write_columns."""
    rows = []
    for s in range(len(metrics["crossover"])):
        key = f"s{s}"
        c = metrics["crossover"][key]
        switches = " ".join(f"{p['r']:.12g}:{p['to']}" for p in c["switch_points"].values())
        row = {"sentence": s, "r_star": c["r_star"], "log10_r_star": c["log10_r_star"], "neighbours": c["neighbours"]}
        row["switch_points"] = switches
        row.update({f"scaling.{k}": v for k, v in metrics["transformer_scaling"][key].items()})
        row.update(flatten(metrics["sweep"][key]))
        rows.append(row)
    return {name: [row[name] for row in rows] for name in rows[0]} if rows else {}


def projection_arrays(sweep: Sweep) -> dict[str, np.ndarray]:
    """data/sweep/projections.npz: per sentence s{i}_coords (P, n, 2), s{i}_explained_variance_ratio (P, 2),
    s{i}_grid_coords (m, n, 2), s{i}_grid_explained_variance_ratio (m, 2)."""
    arrays = {}
    for s, sentence in enumerate(sweep.sentences):
        arrays[f"s{s}_coords"], arrays[f"s{s}_explained_variance_ratio"] = sentence.coords, sentence.explained
        arrays[f"s{s}_grid_coords"] = sentence.grid_coords
        arrays[f"s{s}_grid_explained_variance_ratio"] = sentence.grid_explained
    return arrays


def projection_meta(sweep: Sweep, tokens: dict, encoded: dict) -> dict:
    """data/sweep/projections.json: what was projected (encoding kind, GloVe source, d), the weight pairs, the
    ratio grid, and per sentence its text, words and padded positions."""
    return {
        "encoding": encoded["kind"],
        "glove": encoded["glove"],
        "d_model": sweep.d_model,
        "pairs": [
            {
                "label": p.label,
                "title": p.title,
                "w1": p.w1,
                "w2": p.w2,
                "w1_text": p.w1_text,
                "w2_text": p.w2_text,
                "baseline": p.is_baseline,
            }
            for p in sweep.pairs
        ],
        "ratios": sweep.ratios.tolist(),
        "sentences": [
            {"text": text, "words": words, "positions": positions}
            for text, words, positions in zip(tokens["texts"], tokens["words"], tokens["positions"])
        ],
    }


def ratio_columns(sweep: Sweep, sentences: int | None = None) -> dict[str, list]:
    """The metrics against the ratio grid of the first `sentences` sentences (default: all) in long format, one row
    per sentence and ratio: sentence, r, log10_r, then every metric (reports/plots/ratio_sweep.csv, and every
    sentence's in data/sweep/ratio_sweep.csv)."""
    chosen = sweep.sentences[:sentences]
    m = len(sweep.ratios)
    columns: dict[str, list] = {
        "sentence": [s for s in range(len(chosen)) for _ in range(m)],
        "r": sweep.ratios.tolist() * len(chosen),
        "log10_r": np.log10(sweep.ratios).tolist() * len(chosen),
    }
    for key in chosen[0].curves if chosen else ():
        columns[key] = np.concatenate([sentence.curves[key] for sentence in chosen]).tolist()
    return columns


def _finite(tree):
    """NaN -> None, through nested dicts."""
    if isinstance(tree, dict):
        return {k: _finite(v) for k, v in tree.items()}
    if isinstance(tree, float) and tree != tree:
        return None
    return tree
