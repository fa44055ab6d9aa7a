"""The sweep: W1 * word_embedding + W2 * positional_encoding for every weight pair and every sentence, projected
to 2-D with PCA and measured (pipeline.core.metrics); arrays and dicts in, arrays and dicts out, no files; numpy
only (no torch: the sweep stage starts in a fraction of torch's import time).

Per sentence three batches of weights go through one batched PCA: the configured pairs (baseline W1=1, W2=0
first), the Transformer's scaling W1 = sqrt(d), W2 = 1, and the ratio grid W1 = 1, W2 = r. Every number has the
same bits on every machine (pipeline.core.portable, pipeline.core.eigen); projections are rounded to
SIGNIFICANT_DIGITS of each frame's largest coordinate before anything is measured or saved, so that metrics, files
and figures agree. The metrics of the whole
batch are computed at once too (pipeline.core.metrics.batch_metrics, in chunks of bounded memory).

Sentences of the same length go through together, up to SENTENCES_AT_ONCE at a time: one PCA, one batch of
metrics and one lockstep bisection for all of them. Every step works on each sentence and pair on its own
(elementwise arithmetic, reductions over the same contiguous axes, one LAPACK call per matrix), so a sentence's
numbers have the same bits alone or among thousands (tests/test_sweep.py).

The crossover r* is exact: wherever the k-NN curves switch between two grid ratios, the switch is located by
bisection on r to a relative 1e-9, evaluating the d-dimensional k-NN metrics at the new ratios (they need no
projection). The grid stays for the curves.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from pipeline.base.errors import PipelineError
from pipeline.base.files import round_significant
from pipeline.base.progress import Progress
from pipeline.base.trees import flatten
from pipeline.core.portable import cr_log10, logspace
from pipeline.core.metrics import (
    RTOL,
    Reference,
    batch_metrics,
    bisect_switches,
    crossover,
    knn_overlaps,
    pairwise_distances,
    positional_wins,
    procrustes_disparities,
    valid_neighbours,
)
from pipeline.core.eigen import PROJECTION_WORK  # a long sentence's weightings projected in parts
from pipeline.core.projection import weighted_pca
from pipeline.core.weights import WeightPair, weight_pairs


# metrics.json's transformer_scaling.s{i}: the metrics reported at the paper's scaling
SCALING_METRICS = ("knn_semantic_hd", "knn_positional_hd", "trustworthiness_2d", "pca_disparity")
# Work measured at once stays near this size: a chunk's weighted points, their row differences and distances,
# about 16 n (n + d) bytes per weighting of n words (pipeline.core.metrics.pairwise_distances works row by row).
CHUNK_BYTES = 64 * 2**20
# Sentences of one length swept together: enough to batch the bisections (about 30 steps each) and numpy's calls,
# few enough that progress lines still come (the chunk's memory is bounded by CHUNK_BYTES as well).
SENTENCES_AT_ONCE = 256


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
    """(points,) r = W2 / W1 values, log-spaced from sweep.ratios.min to sweep.ratios.max (numpy.logspace, its
    logarithms and powers correctly rounded)."""
    return logspace(cr_log10(cfg.min), cr_log10(cfg.max), cfg.points)


def transformer_pair(d_model: int) -> WeightPair:
    """The paper's scaling: embeddings * sqrt(d_model), positional encodings * 1."""
    return WeightPair(math.sqrt(d_model), 1.0, "sqrt_d", "1")


def project(
    e: np.ndarray, p: np.ndarray, pairs: Sequence[WeightPair], n_components: int = 2
) -> tuple[np.ndarray, np.ndarray]:
    """PCA of W1 * e + W2 * p for every pair at once (pipeline.core.projection.weighted_pca: one stacked eigh
    of the pairs' n x n Gram matrices), as scikit-learn's PCA gives it, signs included.

    e, p: (n, d) embeddings and encodings of one sentence, or (S, n, d) of S sentences. Returns coords
    ([S,] pairs, n, k) rounded to SIGNIFICANT_DIGITS of each frame's largest coordinate, and explained variance
    ratios ([S,] pairs, k) rounded to SIGNIFICANT_DIGITS of 1, both float64.
    """
    coords, ratio = weighted_pca(e, p, [pair.w1 for pair in pairs], [pair.w2 for pair in pairs], n_components)
    frame_scale = np.abs(coords).max(axis=(-2, -1), keepdims=True)
    return round_significant(coords, floor=frame_scale), round_significant(ratio, floor=1.0)


def measure(
    pairs: Sequence[WeightPair], coords: np.ndarray, explained: np.ndarray, ref: Reference, progress: Progress
) -> dict:
    """Every metric of B weightings of S sentences of n words, each an (S, B) array: coords (S, B, n, 2) their
    projections (the baseline's first), explained (S, B, 2), ref the sentences' references (e, p (S, n, d));
    each chunk's weightings counted on `progress` (past the B projections)."""
    w1 = np.array([pair.w1 for pair in pairs])[:, None, None]
    w2 = np.array([pair.w2 for pair in pairs])[:, None, None]
    S, n, d = ref.e.shape
    step = max(1, CHUNK_BYTES // (16 * S * n * (n + d)))
    parts = []
    for a in range(0, len(pairs), step):
        weighted = w1[a : a + step] * ref.e[:, None] + w2[a : a + step] * ref.p[:, None]
        parts.append(batch_metrics(weighted, coords[:, a : a + step], ref))
        progress.update(len(pairs) + a + step)
    values = {key: np.concatenate([part[key] for part in parts], axis=1) for key in parts[0]}
    baseline_rows = np.array([pair.is_baseline for pair in pairs])
    values["pca_disparity"] = np.where(baseline_rows, 0.0, procrustes_disparities(coords[:, 0], coords))
    values["explained_variance_2d"] = explained.sum(axis=-1)
    return values


def wins_at(ref: Reference, rows: np.ndarray, r: np.ndarray) -> np.ndarray:
    """positional_wins of sentences `rows` (A,) of a Reference of S sentences at W1 = 1, W2 = r (A, j): (A, j)
    bool, computed as the grid's points are, in chunks of bounded memory (CHUNK_BYTES)."""
    _, n, d = ref.e.shape
    rows_at_once = max(1, CHUNK_BYTES // (16 * r.shape[1] * n * (n + d)))
    out = []
    for a in range(0, len(rows), rows_at_once):
        some, at = rows[a : a + rows_at_once], r[a : a + rows_at_once]
        dist = pairwise_distances(1.0 * ref.e[some, None] + at[:, :, None, None] * ref.p[some, None])  # (A, j, n, n)
        semantic = knn_overlaps(dist, ref.semantic[some], ref.k)
        positional = knn_overlaps(dist, ref.positional[some], ref.k)
        out.append(positional_wins(semantic, positional))
    return np.concatenate(out) if out else np.zeros(r.shape, dtype=bool)


def exact_switches(ratios: np.ndarray, on_grid: np.ndarray, ref: Reference, rtol: float = RTOL) -> list[list]:
    """Every switch between "meaning wins" and "position wins" that the grid brackets, for S sentences at once:
    on_grid (S, m) positional_wins on the grid ratios (m,), ref their Reference. Returns per sentence
    [(r, state after the switch)] in increasing r, each located by bisection on log r to a relative rtol; the
    bisections of all sentences run in lockstep (pipeline.core.metrics.bisect_switches), the brackets still
    narrowing evaluated together. Two switches between the same two grid points are not seen."""
    sentence, left = np.nonzero(on_grid[:, 1:] != on_grid[:, :-1])  # every bracketed switch, by sentence, then r
    state = on_grid[sentence, left + 1]
    found = bisect_switches(
        ratios[left], ratios[left + 1], state, lambda at, mid: wins_at(ref, sentence[at], mid[:, None])[:, 0], rtol
    )
    out: list[list] = [[] for _ in range(len(on_grid))]
    for s, r, after in zip(sentence.tolist(), found.tolist(), state.tolist()):
        out[s].append((r, after))
    return out


def crossover_entry(ratios: np.ndarray, on_grid: np.ndarray, switches: list, k: int) -> dict:
    """metrics.json's crossover.s{i}: r_star (None: positional neighbours never win on the grid; the grid's first
    ratio: they already win there), log10_r_star, neighbours (k), and switch_points {"0": {"r", "to"}, ...}: every
    switch the grid brackets, located to a relative 1e-9, "to" the side that wins after it (position/meaning)."""
    r_star = crossover(ratios, on_grid, switches)
    return {
        "r_star": r_star,
        "log10_r_star": None if r_star is None else cr_log10(r_star),
        "neighbours": k,
        "switch_points": {
            str(i): {"r": r, "to": "position" if state else "meaning"} for i, (r, state) in enumerate(switches)
        },
    }


def sweep_sentences(
    e: np.ndarray,
    p: np.ndarray,
    words: Sequence[Sequence[str]],
    pairs: list[WeightPair],
    ratios: np.ndarray,
    d_model: int,
    groups: Sequence[Sequence[str]],
    neighbours: int,
    n_components: int = 2,
) -> list[SentenceSweep]:
    """The sweep of S sentences of n words at once: e, p (S, n, d) float64 word embeddings and positional
    encodings of their words, words[s] the words of sentence s."""
    S, n, _ = e.shape
    ref = Reference(e, p, words, groups, valid_neighbours(neighbours, n))
    batch = pairs + [transformer_pair(d_model)] + [WeightPair(1.0, float(r), "1", repr(float(r))) for r in ratios]
    step = max(1, PROJECTION_WORK // (S * n**3))
    progress = Progress(f"sweep: the projections and metrics of {S} sentence(s) of {n} words", 2 * len(batch))
    parts = []
    for a in range(0, len(batch), step):
        parts.append(project(e, p, batch[a : a + step], n_components))
        progress.update(a + step)
    coords, explained = (np.concatenate(arrays, axis=1) for arrays in zip(*parts))
    values = measure(batch, coords, explained, ref, progress)
    n_pairs = len(pairs)
    on_grid = positional_wins(
        values["knn_semantic_hd"][:, n_pairs + 1 :], values["knn_positional_hd"][:, n_pairs + 1 :]
    )
    switches = exact_switches(ratios, on_grid, ref)
    out = []
    for s in range(S):
        rows = [{key: float(column[s, j]) for key, column in values.items()} for j in range(n_pairs + 1)]
        at_scaling = rows[n_pairs]
        scaling = {key: at_scaling[key] for key in SCALING_METRICS}
        scaling["semantic_dominates"] = float(at_scaling["knn_semantic_hd"] > at_scaling["knn_positional_hd"])
        out.append(
            SentenceSweep(
                coords=coords[s, :n_pairs],
                explained=explained[s, :n_pairs],
                grid_coords=coords[s, n_pairs + 1 :],
                grid_explained=explained[s, n_pairs + 1 :],
                pairs={pair.label: rows[j] for j, pair in enumerate(pairs)},
                curves={key: column[s, n_pairs + 1 :] for key, column in values.items()},
                crossover=crossover_entry(ratios, on_grid[s], switches[s], ref.k),
                scaling=scaling,
            )
        )
    return out


def sentence_batches(lengths: Sequence[int], pairs: int = 0, d: int = 0) -> list[list[int]]:
    """The sentences (indices) measured together: those of one length, in order, at most SENTENCES_AT_ONCE at a
    time; with `pairs` weightings of d-dimensional points each, fewer where their weighted points, distances, Gram
    matrices and eigenvectors (about 16 pairs n (n + d) bytes a sentence) would pass CHUNK_BYTES."""
    by_length: dict[int, list[int]] = {}
    for i, n in enumerate(lengths):
        by_length.setdefault(n, []).append(i)
    batches = []
    for n, group in by_length.items():
        size = max(1, min(SENTENCES_AT_ONCE, CHUNK_BYTES // max(1, 16 * pairs * n * (n + d))))
        batches += [group[a : a + size] for a in range(0, len(group), size)]
    return batches


def run_sweep(
    tokens: dict,
    embeddings: np.ndarray,
    pe: np.ndarray,
    d_model: int,
    sweep_cfg: Any,
    metrics_cfg: Any,
) -> Sweep:
    """Every sentence of tokens.json through the sweep, those of one length together (sentence_batches).

    embeddings: (V + 1, d) rows by word index; pe: (max_len, d) (a memory map is fine: only the sentences'
    positions are read); sweep_cfg, metrics_cfg: the `sweep` and `metrics` configs.
    """
    pairs = weight_pairs(sweep_cfg.w1, sweep_cfg.w2, d_model=d_model)
    ratios = ratio_grid(sweep_cfg.ratios)
    ids, positions, words = tokens["ids"], tokens["positions"], tokens["words"]
    sentences: list = [None] * len(ids)
    progress = Progress("sweep: sentences", len(ids))
    done = 0
    batch_size = len(pairs) + 1 + len(ratios)
    for batch in sentence_batches([len(i) for i in ids], batch_size, embeddings.shape[1]):
        e = np.stack([np.asarray(embeddings[ids[i]], dtype=np.float64) for i in batch])
        p = np.stack([np.asarray(pe[positions[i]], dtype=np.float64) for i in batch])
        results = sweep_sentences(
            e,
            p,
            [words[i] for i in batch],
            pairs,
            ratios,
            d_model,
            metrics_cfg.groups,
            metrics_cfg.neighbours,
            sweep_cfg.n_components,
        )
        for i, result in zip(batch, results):
            sentences[i] = result
        done += len(batch)
        progress.update(done)
    return Sweep(d_model, pairs, ratios, sentences)


def check_max_len(max_len: int, padded_len: int) -> None:
    """Refuse padded sentences longer than the encoding's max_len positions."""
    if max_len < padded_len:
        raise PipelineError(
            f"encoding.max_len = {max_len} is shorter than the padded sentences "
            f"({padded_len} = tokenizer.maxlen): raise encoding.max_len to >= {padded_len} "
            "or lower tokenizer.maxlen."
        )


# Entries of the summary the sweep stage reads (encode.json, with the embedding's facts added: `embedding_facts`) that
# describe the run rather than measure the encoding
ENCODE_INFO = ("kind", "glove", "vocab_size", "oov_count", "oov_words")


def embedding_facts(glove: str, word_index: dict[str, int], missing: list[str]) -> dict:
    """The embedding's entries of ENCODE_INFO: the GloVe source's name, the vocabulary's size and the words of the
    word index that GloVe lacks."""
    return {"glove": glove, "vocab_size": len(word_index), "oov_count": len(missing), "oov_words": missing}


def metrics(sweep: Sweep, encoded: dict) -> dict:
    """reports/metrics.json: from encoded (the encode stage's summary, encode.json, with `embedding_facts`)
    "encoding" (its measurements) and "embedding" (vocabulary counts), then per sentence s{i} the pairs' metrics, the crossover and the
    Transformer scaling. NaN (a metric undefined here, e.g. no semantic group in the sentence) becomes None (JSON
    null)."""
    scaling: dict = {"r": sweep.scaling_ratio}
    scaling.update({f"s{s}": sentence.scaling for s, sentence in enumerate(sweep.sentences)})
    return _finite(
        {
            "encoding": {key: value for key, value in encoded.items() if key not in ENCODE_INFO},
            "embedding": {
                "vocab_size": encoded["vocab_size"],
                "oov_count": encoded["oov_count"],
                "oov_share": encoded["oov_count"] / encoded["vocab_size"],  # of the distinct words
            },
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
    """data/sweep/projections.json: what was projected (encoding kind, GloVe source, d, the words of the word index
    GloVe lacks: zero vectors), the weight pairs, the ratio grid, and per sentence its text, words and padded
    positions."""
    return {
        "encoding": encoded["kind"],
        "glove": encoded["glove"],
        "oov_words": encoded["oov_words"],
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


def ratio_columns(sweep: Sweep, sentences: int | None = None) -> dict[str, np.ndarray]:
    """The metrics against the ratio grid of the first `sentences` sentences (default: all) in long format, one row
    per sentence and ratio: sentence, r, log10_r, then every metric (reports/plots/ratio_sweep.csv, and every
    sentence's in data/sweep/ratio_sweep.csv)."""
    chosen = sweep.sentences[:sentences]
    columns: dict[str, np.ndarray] = {
        "sentence": np.repeat(np.arange(len(chosen)), len(sweep.ratios)),
        "r": np.tile(sweep.ratios, len(chosen)),
        "log10_r": np.tile([cr_log10(r) for r in sweep.ratios.tolist()], len(chosen)),
    }
    for key in chosen[0].curves if chosen else ():
        columns[key] = np.concatenate([sentence.curves[key] for sentence in chosen])
    return columns


def _finite(tree):
    """NaN -> None, through nested dicts."""
    if isinstance(tree, dict):
        return {k: _finite(v) for k, v in tree.items()}
    if isinstance(tree, float) and tree != tree:
        return None
    return tree
