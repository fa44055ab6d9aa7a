"""Stage encode: the positional encoding (sinusoidal, or a seeded learned table) + its diagnostics, and the
embedding matrix of the word index.

Writes data/encode/:
  pe.npy (max_len, d), embeddings.npy (V + 1, d), encode.json (numbers reported as metrics);
  dot.npy, distance.npy: PE(a).PE(b) and ||PE(a) - PE(b)||, float32, full when max_len <= encoding.max_matrix_size,
      else exact f x f block means (f = ceil(max_len / max_matrix_size)) computed from the 1-D profiles:
      no max_len x max_len matrix is ever formed or written;
  matrices.json: encoding, layout, block side f, side, positions covered, whether the matrices are Toeplitz;
  profiles.npz (sinusoidal only): offset k = 0..max_len-1, dot(k), distance(k) over the sin/cos pairs, and for odd d the
      unpaired sine column u(p) (dot[a, b] = dot(|a-b|) + u(a) u(b); empty for even d);
and the property plots reports/plots/pe_norms.csv and reports/plots/offset_distance.csv.
"""
from __future__ import annotations

import logging
from pathlib import Path

from pipeline.errors import PipelineError
from pipeline.paths import Layout

log = logging.getLogger("pipeline")
MAX_PLOT_ROWS = 4096


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
    from pipeline.files import read_json, write_columns, write_json, write_npy, write_npz
    from pipeline.glove_store import GloveStore

    cfg = params["encoding"]  # validated by pipeline.config.validate: name, layout, max_matrix_size
    kind, pe_layout, max_size = cfg["name"], cfg["layout"], cfg["max_matrix_size"]
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
    if kind == "learned":   # a seeded random table: the generic (any matrix) diagnostics
        from pipeline.position_modules import learned_position_table

        pe = learned_position_table(cfg["max_len"], d, cfg["seed"], cfg["init"], cfg["scale"], device=device,
                                    dtype=resolve_dtype(cfg["dtype"]))
        diag = pe_lib.matrix_diagnostics(pe, cfg["base"], cfg["max_offset"], max_size)
    else:
        pe = pe_lib.sinusoidal_encoding(cfg["max_len"], d, cfg["base"], layout=pe_layout, device=device,
                                        dtype=resolve_dtype(cfg["dtype"]))
        diag = pe_lib.sinusoidal_diagnostics(pe, cfg["base"], cfg["max_offset"], max_size)
    norms, lo, hi, closed = diag.norms, diag.offset_lo, diag.offset_hi, diag.offset_closed
    expected = pe_lib.expected_norm(d)

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
    write_npy(out / "dot.npy", diag.dot_blocks.cpu().numpy().astype(np.float32))
    write_npy(out / "distance.npy", diag.distance_blocks.cpu().numpy().astype(np.float32))
    profiles = diag.profiles
    (out / "profiles.npz").unlink(missing_ok=True)          # a learned table has none
    if profiles is not None:
        write_npz(out / "profiles.npz", {
            "offset": np.arange(cfg["max_len"]), "dot": profiles.dot.cpu().numpy(),
            "distance": profiles.distance.cpu().numpy(),
            "unpaired": np.empty(0) if profiles.unpaired is None else profiles.unpaired.cpu().numpy()})
    side = diag.dot_blocks.shape[0]
    write_json(out / "matrices.json", {
        "encoding": kind, "layout": pe_layout if profiles is not None else None, "block": diag.factor,
        "side": side, "positions_covered": side * diag.factor,
        "toeplitz": profiles is not None and profiles.toeplitz,
        "method": ("closed-form profiles" if profiles is not None else "float64 Gram of the matrix")
        + ("" if diag.factor == 1 else ", exact block means")})

    n = cfg["max_len"]
    norm_positions = [p for p in cfg["norm_positions"] or [] if p < n]
    distance_pairs = [(p, q) for p, q in cfg["distance_pairs"] or [] if max(p, q) < n]
    skipped = len(cfg["norm_positions"] or []) - len(norm_positions) + len(cfg["distance_pairs"] or []) - len(distance_pairs)
    if skipped:
        log.warning("encode: %d probe(s) in encoding.norm_positions / distance_pairs lie beyond encoding.max_len=%d "
                    "and are skipped", skipped, n)
    summary = {
        "kind": kind,
        "d_model": d,
        "max_len": cfg["max_len"],
        "device": str(device),
        "norm_expected": expected,
        "norm_max_abs_dev": float((norms - expected).abs().max()),
        "offset_distance_max_spread": float((hi - lo).max()) if len(lo) else 0.0,
        "offset_distance_closed_form_max_abs_err": float(torch.maximum((hi - closed).abs(), (lo - closed).abs()).max())
        if len(lo) else 0.0,
        "norm": {f"p{p}": float(norms[p]) for p in norm_positions},
        "distance": {f"p{p}_p{q}": float(torch.linalg.vector_norm(pe[p].to(norms.dtype) - pe[q].to(norms.dtype)))
                     for p, q in distance_pairs},
        "vocab_size": len(tokens["word_index"]),
        "oov_count": len(missing),
        "oov_words": missing,
    }
    write_json(out / "encode.json", summary)
    norms_np, lo_np, hi_np, closed_np = (t.cpu().numpy() for t in (norms, lo, hi, closed))
    stride = -(-len(norms_np) // MAX_PLOT_ROWS)  # plot data stays small at max_len = 1M; the metric saw every row
    shown = range(0, len(norms_np), stride)
    write_columns(layout.plots_dir / "pe_norms.csv", {"position": list(shown),
                                                      "norm": [float(norms_np[p]) for p in shown],
                                                      "sqrt_d_over_2": [expected] * len(shown)})
    write_columns(layout.plots_dir / "offset_distance.csv", {
        "k": list(range(1, len(lo_np) + 1)), "min_over_p": [float(v) for v in lo_np],
        "max_over_p": [float(v) for v in hi_np], "closed_form": [float(v) for v in closed_np]})
    log.info("encode: PE %dx%d (%s) on %s; max |norm - sqrt(d/2)| = %.2e; max spread over p of "
             "||PE(p)-PE(p+k)|| = %.2e; matrices %dx%d (blocks of %d); %d OOV", cfg["max_len"], d,
             pe_layout if kind == "sinusoidal" else kind, device,
             summary["norm_max_abs_dev"], summary["offset_distance_max_spread"], side, side, diag.factor, len(missing))
    return summary


if __name__ == "__main__":
    from pipeline.stages._cli import stage_main

    stage_main("encode", run)
