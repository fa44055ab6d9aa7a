"""Stage sweep: W1 * word_embedding + W2 * positional_encoding for every weight pair and sentence, projected
to 2-D with PCA; writes data/sweep/ and reports/metrics.json."""
from __future__ import annotations

import logging
from pathlib import Path

from pipeline.paths import Layout

log = logging.getLogger("pipeline")


def project_sentence(embeddings, pe, ids, positions, pairs, device):
    """2-D PCA of W1 * E[ids] + W2 * PE[positions] for every pair at once.

    embeddings: (V, d); pe: (max_len, d); ids, positions: (n,). Returns coords (pairs, n, 2) and
    explained variance ratios (pairs, 2) as numpy float64.
    """
    import torch

    from pipeline.projection import pca_project

    e = torch.as_tensor(embeddings[ids], device=device, dtype=torch.float64 if device.type != "mps" else torch.float32)
    p = torch.as_tensor(pe[positions], device=device, dtype=e.dtype)
    w1 = torch.tensor([pair.w1 for pair in pairs], device=device, dtype=e.dtype)[:, None, None]
    w2 = torch.tensor([pair.w2 for pair in pairs], device=device, dtype=e.dtype)[:, None, None]
    coords, ratio = pca_project(w1 * e[None] + w2 * p[None], n_components=2)
    return coords.cpu().double().numpy(), ratio.cpu().double().numpy()


def run(params: dict, layout: Layout, root: Path) -> dict:
    import numpy as np

    from pipeline.device import resolve_device
    from pipeline.files import read_json, write_json, write_npz
    from pipeline.projection import procrustes_disparity
    from pipeline.weights import weight_pairs

    tokens = read_json(layout.tokens)
    encoded = read_json(layout.encode_dir / "encode.json")
    embeddings = np.load(layout.encode_dir / "embeddings.npy")
    pe = np.load(layout.encode_dir / "pe.npy", mmap_mode="r")
    pairs = weight_pairs(params["sweep"]["w1"], params["sweep"]["w2"], d_model=encoded["d_model"])
    device = resolve_device(params["encoding"]["device"])

    arrays, sentences, sweep_metrics = {}, [], {}
    for s, (ids, positions) in enumerate(zip(tokens["ids"], tokens["positions"])):
        coords, ratio = project_sentence(embeddings, pe, np.array(ids), np.array(positions), pairs, device)
        arrays[f"s{s}_coords"], arrays[f"s{s}_explained_variance_ratio"] = coords, ratio
        baseline = coords[0]
        sweep_metrics[f"s{s}"] = {
            pair.label: {
                "pca_disparity": 0.0 if pair.is_baseline else procrustes_disparity(baseline, coords[j]),
                "explained_variance_2d": float(ratio[j].sum()),
            }
            for j, pair in enumerate(pairs)
        }
        sentences.append({"text": tokens["texts"][s], "words": tokens["words"][s], "positions": positions})

    out = layout.sweep_dir
    write_npz(out / "projections.npz", arrays)
    write_json(out / "projections.json", {
        "d_model": encoded["d_model"],
        "pairs": [{"label": p.label, "title": p.title, "w1": p.w1, "w2": p.w2, "w1_text": p.w1_text,
                   "w2_text": p.w2_text, "baseline": p.is_baseline} for p in pairs],
        "sentences": sentences,
    })
    encoding_metrics = {k: v for k, v in encoded.items() if k not in ("oov_words", "device", "vocab_size", "oov_count")}
    metrics = {
        "encoding": encoding_metrics,
        "embedding": {"vocab_size": encoded["vocab_size"], "oov_count": encoded["oov_count"]},
        "sweep": sweep_metrics,
    }
    write_json(layout.metrics, metrics)
    log.info("sweep: %d weight pairs x %d sentences projected", len(pairs), len(sentences))
    return metrics


if __name__ == "__main__":
    from pipeline.stages._cli import stage_main

    stage_main("sweep", run)
