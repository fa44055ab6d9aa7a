"""The sweep: W1 * word_embedding + W2 * positional_encoding for every weight pair and every sentence, projected
to 2-D with PCA and measured (pipeline.core.metrics); arrays and dicts in, arrays and dicts out, no files.

Per sentence three batches of weights go through one batched PCA: the configured pairs (baseline W1=1, W2=0
first), the Transformer's scaling W1 = sqrt(d), W2 = 1, and the ratio grid W1 = 1, W2 = r. Projections are
rounded to SIGNIFICANT_DIGITS of each frame's largest coordinate before anything is measured or saved, so that
metrics, files and figures agree and do not change with the CPU's summation order.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from pipeline.base.files import round_significant
from pipeline.core.metrics import crossover, sentence_metrics, valid_neighbours
from pipeline.core.projection import procrustes_disparity
from pipeline.core.weights import WeightPair, weight_pairs

# metrics.json's transformer_scaling.s{i}: the metrics reported at the paper's scaling
SCALING_METRICS = ("knn_semantic_hd", "knn_positional_hd", "trustworthiness_2d", "pca_disparity")


@dataclass(frozen=True)
class SentenceSweep:
    """One sentence of n words through the sweep (P configured pairs, m ratios)."""

    coords: np.ndarray            # (P, n, 2) projections of the configured pairs, baseline first
    explained: np.ndarray         # (P, 2) explained variance ratios
    grid_coords: np.ndarray       # (m, n, 2) projections along the ratio grid
    grid_explained: np.ndarray    # (m, 2)
    pairs: dict[str, dict[str, float]]   # pair label -> metric -> value
    curves: dict[str, np.ndarray]        # metric -> (m,) values along the ratio grid
    crossover: dict                      # r_star (None: beyond the grid), log10_r_star, neighbours
    scaling: dict                        # SCALING_METRICS at W1 = sqrt(d), W2 = 1, and semantic_dominates


@dataclass(frozen=True)
class Sweep:
    d_model: int
    pairs: list[WeightPair]
    ratios: np.ndarray            # (m,) r = W2 / W1 of the grid
    sentences: list[SentenceSweep]

    @property
    def scaling_ratio(self) -> float:
        """r = W2 / W1 at the Transformer's scaling: 1 / sqrt(d)."""
        return 1 / math.sqrt(self.d_model)


def ratio_grid(cfg: dict) -> np.ndarray:
    """(points,) r = W2 / W1 values, log-spaced from sweep.ratios.min to sweep.ratios.max."""
    return np.logspace(np.log10(cfg["min"]), np.log10(cfg["max"]), cfg["points"])


def transformer_pair(d_model: int) -> WeightPair:
    """The paper's scaling: embeddings * sqrt(d_model), positional encodings * 1."""
    return WeightPair(math.sqrt(d_model), 1.0, "sqrt_d", "1")


def grid_pairs(ratios: np.ndarray) -> list[WeightPair]:
    return [WeightPair(1.0, float(r), "1", repr(float(r))) for r in ratios]


def project(e: np.ndarray, p: np.ndarray, pairs: Sequence[WeightPair], n_components: int = 2,
            device="cpu") -> tuple[np.ndarray, np.ndarray]:
    """PCA of W1 * e + W2 * p for every pair at once (pipeline.core.projection.weighted_pca: one batched eigh
    of the pairs' n x n Gram matrices), as scikit-learn's PCA gives it, signs included.

    e, p: (n, d) embeddings and encodings of one sentence. Returns coords (pairs, n, k) rounded to
    SIGNIFICANT_DIGITS of each frame's largest coordinate, and explained variance ratios (pairs, k) rounded
    to SIGNIFICANT_DIGITS of 1, both float64.
    """
    import torch

    from pipeline.core.projection import weighted_pca

    coords, ratio = weighted_pca(torch.as_tensor(e, device=device), torch.as_tensor(p, device=device),
                                 [pair.w1 for pair in pairs], [pair.w2 for pair in pairs], n_components=n_components)
    coords, ratio = coords.cpu().double().numpy(), ratio.cpu().double().numpy()
    frame_scale = np.abs(coords).max(axis=(1, 2), keepdims=True)
    return round_significant(coords, floor=frame_scale), round_significant(ratio, floor=1.0)


def measure(pair: WeightPair, coords: np.ndarray, explained: np.ndarray, baseline: np.ndarray, e: np.ndarray,
            p: np.ndarray, words: Sequence[str], groups: Sequence[Sequence[str]], k: int) -> dict[str, float]:
    """Every metric of one weighted sentence: coords (n, 2) its projection, explained (2,), baseline (n, 2) the
    pure-embedding projection, e, p (n, d)."""
    values = sentence_metrics(pair.w1 * e + pair.w2 * p, coords, e, p, words, groups, k)
    values["pca_disparity"] = 0.0 if pair.is_baseline else procrustes_disparity(baseline, coords)
    values["explained_variance_2d"] = float(explained.sum())
    return values


def sweep_sentence(e: np.ndarray, p: np.ndarray, words: Sequence[str], pairs: list[WeightPair], ratios: np.ndarray,
                   d_model: int, groups: Sequence[Sequence[str]], neighbours: int, n_components: int = 2,
                   device="cpu") -> SentenceSweep:
    """The sweep of one sentence: e, p (n, d) float64 word embeddings and positional encodings of its words."""
    k = valid_neighbours(neighbours, len(words))
    scaling_pair, grid = transformer_pair(d_model), grid_pairs(ratios)
    batch = pairs + [scaling_pair] + grid
    coords, explained = project(e, p, batch, n_components, device)
    baseline = coords[0]

    def metrics_of(j: int) -> dict[str, float]:
        return measure(batch[j], coords[j], explained[j], baseline, e, p, words, groups, k)

    n_pairs = len(pairs)
    dense = [metrics_of(n_pairs + 1 + g) for g in range(len(grid))]
    curves = {key: np.array([row[key] for row in dense]) for key in dense[0]}
    r_star = crossover(ratios, curves["knn_semantic_hd"], curves["knn_positional_hd"])
    at_scaling = metrics_of(n_pairs)
    scaling = {key: at_scaling[key] for key in SCALING_METRICS}
    scaling["semantic_dominates"] = float(r_star is None or 1 / math.sqrt(d_model) < r_star)
    return SentenceSweep(
        coords=coords[:n_pairs], explained=explained[:n_pairs],
        grid_coords=coords[n_pairs + 1:], grid_explained=explained[n_pairs + 1:],
        pairs={pair.label: metrics_of(j) for j, pair in enumerate(pairs)},
        curves=curves,
        crossover={"r_star": r_star, "log10_r_star": None if r_star is None else math.log10(r_star), "neighbours": k},
        scaling=scaling,
    )


def run_sweep(tokens: dict, embeddings: np.ndarray, pe: np.ndarray, d_model: int, sweep_cfg: dict,
              metrics_cfg: dict, device="cpu") -> Sweep:
    """Every sentence of tokens.json through the sweep.

    embeddings: (V + 1, d) rows by word index; pe: (max_len, d) (a memory map is fine: only the sentences'
    positions are read); sweep_cfg, metrics_cfg: the `sweep` and `metrics` configs.
    """
    pairs = weight_pairs(sweep_cfg["w1"], sweep_cfg["w2"], d_model=d_model)
    ratios = ratio_grid(sweep_cfg["ratios"])
    sentences = []
    for ids, positions, words in zip(tokens["ids"], tokens["positions"], tokens["words"]):
        e = np.asarray(embeddings[ids], dtype=np.float64)
        p = np.asarray(pe[positions], dtype=np.float64)
        sentences.append(sweep_sentence(e, p, words, pairs, ratios, d_model, metrics_cfg["groups"],
                                        metrics_cfg["neighbours"], sweep_cfg["n_components"], device))
    return Sweep(d_model, pairs, ratios, sentences)


def metrics(sweep: Sweep, encoded_metrics: dict) -> dict:
    """reports/metrics.json: encoded_metrics (pipeline.core.encode.summary_metrics: encoding, embedding), then
    per sentence s{i} the pairs' metrics, the crossover and the Transformer scaling. NaN (a metric undefined
    here, e.g. no semantic group in the sentence) becomes None (JSON null)."""
    scaling: dict = {"r": sweep.scaling_ratio}
    scaling.update({f"s{s}": sentence.scaling for s, sentence in enumerate(sweep.sentences)})
    return _finite({
        **encoded_metrics,
        "sweep": {f"s{s}": sentence.pairs for s, sentence in enumerate(sweep.sentences)},
        "crossover": {f"s{s}": sentence.crossover for s, sentence in enumerate(sweep.sentences)},
        "transformer_scaling": scaling,
    })


# reports/headline.json: name -> where its value comes from in metrics.json ({s} stands for each sentence s{i})
HEADLINE = {
    "r_star.{s}": "crossover.{s}.r_star",                           # W2/W1 where position overtakes meaning
    "sqrt_d_semantic.{s}": "transformer_scaling.{s}.semantic_dominates",  # 1: meaning still wins at W1=sqrt(d), W2=1
    "pe_norm_dev": "encoding.norm_max_abs_dev",                     # property 1: max |norm - sqrt(d/2)|
    "pe_offset_spread": "encoding.offset_distance_max_spread",      # property 2: distance depends on offset only
    "oov_count": "embedding.oov_count",
}


def headline(metrics: dict) -> dict:
    """reports/headline.json, the DVC metric of the pipeline (what `dvc exp show` and `dvc metrics show/diff`
    print): the few numbers of `metrics` (metrics.json, the full table) in HEADLINE, under short names so
    that the table stays narrow. Flat: {"r_star.s0": ..., ..., "oov_count": ...}."""

    def value(path: str):
        node = metrics
        for key in path.split("."):
            node = node[key]
        return node

    sentences = sorted(metrics["crossover"], key=lambda s: int(s[1:]))
    flat = {}
    for name, path in HEADLINE.items():
        for s in sentences if "{s}" in name else [None]:
            flat[name.format(s=s)] = value(path.format(s=s))
    return flat


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
        "pairs": [{"label": p.label, "title": p.title, "w1": p.w1, "w2": p.w2, "w1_text": p.w1_text,
                   "w2_text": p.w2_text, "baseline": p.is_baseline} for p in sweep.pairs],
        "ratios": sweep.ratios.tolist(),
        "sentences": [{"text": text, "words": words, "positions": positions}
                      for text, words, positions in zip(tokens["texts"], tokens["words"], tokens["positions"])],
    }


def ratio_columns(sweep: Sweep, sentence: int) -> dict[str, list[float]]:
    """One sentence's metrics against the ratio grid: r, log10_r, then every metric (reports/plots/ratio_sweep/)."""
    columns = {"r": sweep.ratios.tolist(), "log10_r": np.log10(sweep.ratios).tolist()}
    columns.update({key: values.tolist() for key, values in sweep.sentences[sentence].curves.items()})
    return columns


def _finite(tree):
    """NaN -> None, through nested dicts."""
    if isinstance(tree, dict):
        return {k: _finite(v) for k, v in tree.items()}
    if isinstance(tree, float) and tree != tree:
        return None
    return tree
