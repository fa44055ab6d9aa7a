"""Stage encode: sinusoidal PE + its diagnostics, and the embedding matrix of the word index.

Writes data/encode/ (pe.npy, embeddings.npy, dot.npy, distance.npy, encode.json) and the
property plots reports/plots/pe_norms.csv and reports/plots/offset_distance.csv.
"""
from __future__ import annotations

import logging
from pathlib import Path

from pipeline.errors import PipelineError
from pipeline.paths import Layout

log = logging.getLogger("pipeline")


def _csv(rows: list[tuple], header: tuple[str, ...]) -> str:
    return ",".join(header) + "\n" + "".join(",".join(repr(v) for v in row) + "\n"
                                             for row in rows)


def embedding_matrix(tokens: dict, store) -> tuple["np.ndarray", list[str]]:
    """(len(word_index) + 1, dim) float32: row i is the vector of the word with index i; row 0 and OOV rows are zero."""
    import numpy as np

    by_index = sorted(tokens["word_index"].items(), key=lambda item: item[1])
    vectors, missing = store.lookup([word for word, _ in by_index])
    matrix = np.zeros((len(by_index) + 1, store.dim), dtype=np.float32)
    matrix[[index for _, index in by_index]] = vectors
    return matrix, missing


def run(params: dict, layout: Layout, root: Path) -> dict:
    import numpy as np
    import torch

    from pipeline import encoding as pe_lib
    from pipeline.device import resolve_device, resolve_dtype
    from pipeline.files import read_json, write_json, write_npy, write_text
    from pipeline.glove_store import GloveStore

    cfg = params["encoding"]
    store = GloveStore.open(layout.glove_dir)
    if store.dim != params["glove"]["dim"]:
        raise PipelineError(f"glove.dim = {params['glove']['dim']} but the vectors in {layout.glove_dir} have "
                            f"{store.dim} dimensions: set glove.dim={store.dim}, or re-run the glove stage.")
    d = cfg["d_model"] or store.dim
    if d != store.dim:
        raise PipelineError(f"encoding.d_model = {d} differs from the GloVe dimension {store.dim}: the encoding is "
                            "added to the word vectors, so set encoding.d_model=null (or to the GloVe dimension).")
    tokens = read_json(layout.tokens)
    padded_len = len(tokens["padded"][0])
    if cfg["max_len"] < padded_len:
        raise PipelineError(f"encoding.max_len = {cfg['max_len']} is shorter than the padded sentences "
                            f"({padded_len} = tokenizer.maxlen): raise encoding.max_len to >= {padded_len} "
                            "or lower tokenizer.maxlen.")

    device = resolve_device(cfg["device"])
    pe = pe_lib.sinusoidal_encoding(cfg["max_len"], d, cfg["base"], device=device, dtype=resolve_dtype(cfg["dtype"]))
    norms = pe_lib.position_norms(pe)
    expected = pe_lib.expected_norm(d)
    lo, hi = pe_lib.offset_distances(pe, cfg["max_offset"])
    offsets = torch.arange(1, len(lo) + 1, device=device)
    closed = pe_lib.offset_distance_closed_form(offsets, d, cfg["base"])
    gram = pe_lib.dot_product_matrix(pe)
    dist = pe_lib.distance_matrix(pe, gram)

    matrix, missing = embedding_matrix(tokens, store)
    missing_set = set(missing)
    for i, words in enumerate(tokens["words"]):
        if all(word in missing_set for word in words):
            raise PipelineError(f"every word of sentence {i} ({tokens['texts'][i]!r}) is missing from the GloVe "
                                f"vocabulary ({params['glove']['name']}): its embedding would be all zeros. Fix the "
                                "text (GloVe 6B is lower-case) or choose another glove source.")
    if missing:
        log.warning("encode: %d word(s) not in GloVe get zero vectors: %s", len(missing), ", ".join(missing[:20]))

    out = layout.encode_dir
    write_npy(out / "pe.npy", pe.cpu().numpy())
    write_npy(out / "embeddings.npy", matrix)
    write_npy(out / "dot.npy", gram.cpu().numpy().astype(np.float32))
    write_npy(out / "distance.npy", dist.cpu().numpy().astype(np.float32))

    pe64 = pe.to(norms.dtype)
    n = cfg["max_len"]
    norm_positions = [p for p in cfg["norm_positions"] or [] if p < n]
    distance_pairs = [(p, q) for p, q in cfg["distance_pairs"] or [] if max(p, q) < n]
    skipped = len(cfg["norm_positions"] or []) - len(norm_positions) + len(cfg["distance_pairs"] or []) - len(distance_pairs)
    if skipped:
        log.warning("encode: %d probe(s) in encoding.norm_positions / distance_pairs lie beyond encoding.max_len=%d "
                    "and are skipped", skipped, n)
    summary = {
        "d_model": d,
        "max_len": cfg["max_len"],
        "device": str(device),
        "norm_expected": expected,
        "norm_max_abs_dev": float((norms - expected).abs().max()),
        "offset_distance_max_spread": float((hi - lo).max()) if len(lo) else 0.0,
        "offset_distance_closed_form_max_abs_err": float(torch.maximum((hi - closed).abs(), (lo - closed).abs()).max())
        if len(lo) else 0.0,
        "norm": {f"p{p}": float(norms[p]) for p in norm_positions},
        "distance": {f"p{p}_p{q}": float(torch.linalg.vector_norm(pe64[p] - pe64[q]))
                     for p, q in distance_pairs},
        "vocab_size": len(tokens["word_index"]),
        "oov_count": len(missing),
        "oov_words": missing,
    }
    write_json(out / "encode.json", summary)
    norms_np, lo_np, hi_np, closed_np = (t.cpu().numpy() for t in (norms, lo, hi, closed))
    write_text(layout.plots_dir / "pe_norms.csv",
               _csv([(p, float(n), expected) for p, n in enumerate(norms_np)], ("position", "norm", "sqrt_d_over_2")))
    write_text(layout.plots_dir / "offset_distance.csv",
               _csv([(k + 1, float(lo_np[k]), float(hi_np[k]), float(closed_np[k])) for k in range(len(lo_np))],
                    ("k", "min_over_p", "max_over_p", "closed_form")))
    log.info("encode: PE %dx%d on %s; max |norm - sqrt(d/2)| = %.2e; max spread over p of "
             "||PE(p)-PE(p+k)|| = %.2e; %d OOV", cfg["max_len"], d, device, summary["norm_max_abs_dev"],
             summary["offset_distance_max_spread"], len(missing))
    return summary


if __name__ == "__main__":
    from pipeline.stages._cli import stage_main

    stage_main("encode", run)
