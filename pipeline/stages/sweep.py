"""Stage sweep: W1 * word_embedding + W2 * positional_encoding for every weight pair and sentence, projected
to 2-D with PCA; writes data/sweep/ and reports/metrics.json."""
from __future__ import annotations

import logging
from pathlib import Path

from pipeline.paths import Layout

log = logging.getLogger("pipeline")


def project_sentence(embeddings, pe, ids, positions, pairs, device):
    """2-D PCA of W1 * E[ids] + W2 * PE[positions] for every pair at once: one batched eigendecomposition
    of the pairs' n x n Gram matrices (pipeline.projection.weighted_pca), no pair's matrix formed.

    embeddings: (V, d); pe: (max_len, d); ids, positions: (n,). Returns coords (pairs, n, 2) and
    explained variance ratios (pairs, 2) as numpy float64, as scikit-learn's PCA gives them (signs included).
    """
    import numpy as np
    import torch

    from pipeline.projection import weighted_pca

    e = torch.as_tensor(np.asarray(embeddings[ids]), device=device)
    p = torch.as_tensor(np.asarray(pe[positions]), device=device)
    coords, ratio = weighted_pca(e, p, [pair.w1 for pair in pairs], [pair.w2 for pair in pairs], n_components=2)
    return coords.cpu().double().numpy(), ratio.cpu().double().numpy()


def ratio_grid(cfg: dict) -> "np.ndarray":
    """(points,) r = W2 / W1 values, log-spaced from sweep.ratios.min to sweep.ratios.max."""
    import numpy as np

    return np.logspace(np.log10(cfg["min"]), np.log10(cfg["max"]), cfg["points"])


def run(params: dict, layout: Layout, root: Path) -> dict:
    import math

    import numpy as np

    from pipeline.device import resolve_device
    from pipeline.files import read_json, write_columns, write_json, write_npz
    from pipeline.metrics import crossover, sentence_metrics, valid_neighbours
    from pipeline.projection import procrustes_disparity
    from pipeline.weights import WeightPair, weight_pairs

    tokens = read_json(layout.tokens)
    encoded = read_json(layout.encode_dir / "encode.json")
    embeddings = np.load(layout.encode_dir / "embeddings.npy")
    pe = np.load(layout.encode_dir / "pe.npy", mmap_mode="r")
    d = encoded["d_model"]
    pairs = weight_pairs(params["sweep"]["w1"], params["sweep"]["w2"], d_model=d)
    transformer = WeightPair(math.sqrt(d), 1.0, "sqrt_d", "1")  # the paper's scaling: embeddings * sqrt(d_model)
    ratios = ratio_grid(params["sweep"]["ratios"])
    grid = [WeightPair(1.0, float(r), "1", repr(float(r))) for r in ratios]
    batch = pairs + [transformer] + grid
    groups, device = params["metrics"]["groups"], resolve_device(params["encoding"]["device"])

    arrays, sentences, per_pair, crossovers, scaling = {}, [], {}, {}, {"r": 1 / math.sqrt(d)}
    dense_columns: dict[str, list[float]] = {"r": list(map(float, ratios)), "log10_r": list(map(float, np.log10(ratios)))}
    for s, (ids, positions) in enumerate(zip(tokens["ids"], tokens["positions"])):
        ids, positions, words = np.array(ids), np.array(positions), tokens["words"][s]
        e, p = embeddings[ids].astype(np.float64), np.asarray(pe[positions], dtype=np.float64)
        k = valid_neighbours(params["metrics"]["neighbours"], len(ids))
        coords, evr = project_sentence(embeddings, pe, ids, positions, batch, device)
        baseline = coords[0]

        def measure(j: int) -> dict[str, float]:
            pair = batch[j]
            values = sentence_metrics(pair.w1 * e + pair.w2 * p, coords[j], e, p, words, groups, k)
            values["pca_disparity"] = 0.0 if pair.is_baseline else procrustes_disparity(baseline, coords[j])
            values["explained_variance_2d"] = float(evr[j].sum())
            return values

        per_pair[f"s{s}"] = {pair.label: measure(j) for j, pair in enumerate(pairs)}
        dense = [measure(len(pairs) + 1 + g) for g in range(len(grid))]
        for key in dense[0]:
            dense_columns[f"s{s}_{key}"] = [row[key] for row in dense]
        r_star = crossover(ratios, np.array(dense_columns[f"s{s}_knn_semantic_hd"]),
                           np.array(dense_columns[f"s{s}_knn_positional_hd"]))
        crossovers[f"s{s}"] = {"r_star": r_star, "log10_r_star": None if r_star is None else math.log10(r_star),
                               "neighbours": k}
        at_scaling = measure(len(pairs))
        scaling[f"s{s}"] = {
            "knn_semantic_hd": at_scaling["knn_semantic_hd"],
            "knn_positional_hd": at_scaling["knn_positional_hd"],
            "trustworthiness_2d": at_scaling["trustworthiness_2d"],
            "pca_disparity": at_scaling["pca_disparity"],
            "semantic_dominates": float(r_star is None or scaling["r"] < r_star),
        }
        n_pairs = len(pairs)
        arrays[f"s{s}_coords"], arrays[f"s{s}_explained_variance_ratio"] = coords[:n_pairs], evr[:n_pairs]
        arrays[f"s{s}_grid_coords"], arrays[f"s{s}_grid_explained_variance_ratio"] = coords[n_pairs + 1:], evr[n_pairs + 1:]
        sentences.append({"text": tokens["texts"][s], "words": words, "positions": positions.tolist()})

    out = layout.sweep_dir
    write_npz(out / "projections.npz", arrays)
    write_json(out / "projections.json", {
        "d_model": d,
        "pairs": [{"label": p.label, "title": p.title, "w1": p.w1, "w2": p.w2, "w1_text": p.w1_text,
                   "w2_text": p.w2_text, "baseline": p.is_baseline} for p in pairs],
        "ratios": dense_columns["r"],
        "sentences": sentences,
    })
    write_columns(layout.plots_dir / "ratio_sweep.csv", dense_columns)
    encoding_metrics = {k: v for k, v in encoded.items() if k not in ("kind", "oov_words", "device", "vocab_size", "oov_count")}
    metrics = {
        "encoding": encoding_metrics,
        "embedding": {"vocab_size": encoded["vocab_size"], "oov_count": encoded["oov_count"]},
        "sweep": per_pair,
        "crossover": crossovers,
        "transformer_scaling": scaling,
    }
    write_json(layout.metrics, _finite(metrics))
    log.info("sweep: %d weight pairs + %d ratios x %d sentences; r* = %s", len(pairs), len(grid), len(sentences),
             ", ".join(f"{c['r_star']:.3g}" if c["r_star"] else "beyond grid" for c in crossovers.values()))
    return metrics


def _finite(tree):
    """NaN -> None (JSON null): a metric undefined for this input (e.g. no semantic group present)."""
    if isinstance(tree, dict):
        return {k: _finite(v) for k, v in tree.items()}
    if isinstance(tree, float) and tree != tree:
        return None
    return tree


if __name__ == "__main__":
    from pipeline.stages._cli import stage_main

    stage_main("sweep", run)
