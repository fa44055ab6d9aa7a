"""Stage encode: the positional encoding (sinusoidal, or a seeded learned table) + its diagnostics, the
embedding matrix of the word index, and the encodings long-context models use instead, measured beside it
(RoPE's and ALiBi's diagnostics). One process: both parts use torch, whose import is most of a stage's start.

Writes data/encode/:
  pe.npy (max_len, d), embeddings.npy (V + 1, d), encode.json (numbers reported as metrics);
  dot.npy, distance.npy: PE(a).PE(b) and ||PE(a) - PE(b)||, float32, full when max_len <= encoding.max_matrix_size,
      else exact f x f block means (f = ceil(max_len / max_matrix_size)) computed from the 1-D profiles:
      no max_len x max_len matrix is ever formed or written;
  matrices.json: encoding, layout, block side f, side, positions covered, whether the matrices are Toeplitz;
  profiles.npz (sinusoidal only): offset k = 0..max_len-1, dot(k), distance(k) over the sin/cos pairs, and for odd d the
      unpaired sine column u(p) (dot[a, b] = dot(|a-b|) + u(a) u(b); empty for even d);
and the property plots reports/plots/pe_norms.csv and reports/plots/offset_distance.csv.
The numbers are computed by pipeline.core.encode.

Then RoPE's relative-position diagnostics (scores depend only on m - n; RoFormer's long-term decay bound for the
base, a larger base, NTK-aware scaling and position interpolation) and ALiBi's slopes, biases and penalties, computed
by pipeline.core.relative: data/relative/rope.npz, data/relative/alibi.npz (the figures' data) and
reports/relative.json (the numbers; kept out of headline.json).

Their figures and the tutorials', reports/figures/encode/, are drawn by pipeline.stages._encode_figures' forked
workers while this process computes (the tutorials' data, which uses torch, is computed here).

Reads params: encoding, glove.dim, glove.name, relative, tutorials, the figure settings (registry FIGURE_KEYS); files:
the GloVe store, tokens.json.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
import logging
from pathlib import Path

from pipeline.base.paths import Layout

if TYPE_CHECKING:
    from pipeline.config.schema import Config, PropertiesConfig, RelativeConfig

log = logging.getLogger("pipeline")


def run(params: Config, layout: Layout, root: Path) -> dict:
    """The positional encoding and its diagnostics, then RoPE's and ALiBi's; returns the encoding's summary. The
    figure workers are forked first (before torch is imported here) and each kind's figures are queued as soon as
    its data is written, the longest to draw first: the workers draw while this process computes."""
    from pipeline.stages._encode_figures import draw_encode_figures

    def compute(figures) -> dict:
        import torch

        from pipeline.core.device import resolve_device

        threads = torch.get_num_threads()
        if figures.batch is not None and figures.batch.forked:
            # the figure workers take the other cores meanwhile: torch's intra-op threads would only wait for them
            # (measured on 2 cores: relative_diagnostics 0.35-0.99 -> 0.09 s CPU, encode_positions 0.32 -> 0.18 s,
            # and quicker in wall time too, even at max_len 200,000)
            torch.set_num_threads(1)
        try:
            device = resolve_device(params.encoding.device)
            figures.queue("tutorials")  # their data takes 0.03 s to compute, their figures the longest to draw
            summary = encode_positions(params, layout, device)
            relative_diagnostics(params.relative, layout, device)
            figures.queue("relative")
            family_properties(params.relative, layout)
            figures.queue("properties")
            figures.queue("encoding")  # the quickest to draw: last
        finally:
            torch.set_num_threads(threads)  # a Hydra job's next stages run in this process
        return summary

    return draw_encode_figures(params, layout, compute)


def encode_positions(params: Config, layout: Layout, device) -> dict:
    """data/encode/ and the two property plots; returns the numbers of encode.json."""
    from pipeline.base.files import read_json, write_columns, write_json, write_npy, write_npz
    from pipeline.core import encode
    from pipeline.inputs.glove_store import GloveStore, check_sentences_covered, embedding_matrix

    cfg, glove = params.encoding, params.glove
    store = GloveStore.open(layout.glove_dir, verify=True)
    d = encode.model_dim(cfg, glove.dim, store.dim, layout.glove_dir)
    tokens = read_json(layout.tokens)
    encode.check_max_len(cfg, len(tokens["padded"][0]))

    matrix, missing = embedding_matrix(tokens["word_index"], store)
    check_sentences_covered(tokens["texts"], tokens["words"], missing, glove.name)
    if missing:
        log.warning("encode: %d word(s) not in GloVe get zero vectors: %s", len(missing), ", ".join(missing[:20]))
    pe, diag = encode.position_table(cfg, d, device)
    summary = encode.summary(cfg, pe, diag, glove.name, len(tokens["word_index"]), missing)

    write_npy(layout.pe_matrix, pe.cpu().numpy())
    write_npy(layout.embedding_matrix, matrix)
    matrices = encode.matrices(diag)
    write_npy(layout.dot_matrix, matrices["dot"])
    write_npy(layout.distance_matrix, matrices["distance"])
    profiles = encode.profile_arrays(diag, cfg.max_len)
    layout.profiles.unlink(missing_ok=True)  # a learned table has none
    if profiles is not None:
        write_npz(layout.profiles, profiles)
    info = encode.matrices_info(cfg, diag)
    write_json(layout.matrices_info, info)
    write_json(layout.encode_summary, summary)
    norm_columns, offset_columns = encode.property_columns(diag, summary["norm_expected"])
    write_columns(layout.pe_norms_csv, norm_columns)
    write_columns(layout.offset_distance_csv, offset_columns)
    log.info(
        "encode: PE %dx%d (%s) on %s; max |norm - sqrt(d/2)| = %.2e; max spread over p of "
        "||PE(p)-PE(p+k)|| = %.2e; matrices %dx%d (blocks of %d); %d OOV",
        cfg.max_len,
        d,
        info["layout"] or cfg.name,
        device,
        summary["norm_max_abs_dev"],
        summary["offset_distance_max_spread"],
        info["side"],
        info["side"],
        info["block"],
        len(missing),
    )
    return summary


def relative_diagnostics(cfg: RelativeConfig, layout: Layout, device) -> dict:
    """data/relative/ and reports/relative.json from the `relative` config; returns the numbers."""
    from pipeline.base.files import write_json, write_npz
    from pipeline.core.relative import alibi_diagnostics, rope_diagnostics

    rope_arrays, rope_summary = rope_diagnostics(cfg.rope, device)
    alibi_arrays, alibi_summary = alibi_diagnostics(cfg.alibi, device)
    layout.relative_dir.mkdir(parents=True, exist_ok=True)
    write_npz(layout.rope_arrays, rope_arrays)
    write_npz(layout.alibi_arrays, alibi_arrays)
    summary = {"rope": rope_summary, "alibi": alibi_summary}
    write_json(layout.relative_metrics, summary)
    checks = rope_summary["relative_only"][rope_summary["layout"]]
    base = rope_summary["decay_bound"]["base"]
    log.info(
        "relative: RoPE d=%d (%s): max spread over m of q.R(m-n)k: %.2e (float64), %.2e (float32); decay bound "
        "%s; ALiBi slopes for %s heads",
        rope_summary["d_head"],
        rope_summary["layout"],
        checks["float64_max_spread"],
        checks["float32_max_spread"],
        ", ".join(f"{key[1:]}: {value:.3f}" for key, value in base.items() if key.startswith("d")),
        ", ".join(key[1:] for key in alibi_summary["heads"]),
    )
    return summary


def family_properties(rel: RelativeConfig, layout: Layout) -> dict:
    """reports/properties.json (every family x the literature's properties at d = relative.properties.d, the RoPE
    scalings' summary, MiniLM-L6's probe per head), data/families/scalings.npz and, with the optional extra
    `.[models]`, data/families/minilm.npz (pipeline.core.families); returns the JSON."""
    from pipeline.base.files import write_json, write_npz
    from pipeline.core import families as fam
    from pipeline.core.relative import distance_grid, scaling_diagnostics

    n = rel.properties.positions
    rows = fam.analytic_families(rel, n)
    trained = trained_positions(rel.properties)
    arrays, scalings = scaling_diagnostics(rel, distance_grid(rel.rope.max_distance))
    layout.families_dir.mkdir(parents=True, exist_ok=True)
    write_npz(layout.scaling_arrays, arrays)
    layout.minilm_arrays.unlink(missing_ok=True)  # written below only when the model is there
    summary: dict = {"positions": n, "d": rel.properties.d, "temperature": fam.TEMPERATURE}
    if isinstance(trained, str):
        log.info("properties: no MiniLM-L6 rows: %s", trained)
    else:
        model_rows, model_summary, model_arrays = trained
        rows += model_rows
        write_npz(layout.minilm_arrays, model_arrays)
    summary["families"] = {row.key: fam.row(row) for row in rows}
    summary["chen_locality_by_temperature"] = fam.temperature_sensitivity(rows)
    if not isinstance(trained, str):
        summary["minilm"] = model_summary
    write_json(layout.properties_metrics, {**summary, "rope_scalings": scalings})
    log.info("properties: %d families x %d properties at N = %d, d = %d", len(rows), 5, n, rel.properties.d)
    return summary


def trained_positions(cfg: PropertiesConfig) -> str | tuple[list, dict, dict]:
    """all-MiniLM-L6-v2's rows (pipeline.core.families.minilm_families), its JSON summary (the model, the probe's
    words, per-head scores and ranges) and arrays; or why they are absent (one line)."""
    import numpy as np

    from pipeline.base.files import round_significant
    from pipeline.core import families as fam
    from pipeline.core.probing import probe_words
    from pipeline.inputs import minilm

    folder, version = minilm.find_model()
    if folder is None:
        return version
    model = minilm.read_model(folder, version)
    n = cfg.positions
    if n > model.position.shape[0]:
        return f"relative.properties.positions = {n} exceeds the model's {model.position.shape[0]} positions"
    words = probe_words(model.vocab, cfg.probe_words, cfg.seed)
    rows, logits, attention = fam.minilm_families(model, n, words)
    summary = {
        "model": minilm.MODEL,
        "package": f"{minilm.DISTRIBUTION} {model.version}",
        "sha256": model.sha256,
        "layers": model.layers,
        "heads": model.heads,
        "position_table": list(model.position.shape),
        "probe": {
            "input": f"one word at every position 0..{n - 1}, token type 0, no [CLS] or [SEP]; layer 0's logits "
            "and attention averaged over the words",
            "seed": cfg.seed,
            "words": [model.vocab[i] for i in words],
        },
        **fam.minilm_heads(logits, attention),
        # position 0 ([CLS]'s slot in training) has a norm several times the others': the table without it
        "table_without_position_0": fam.table_scores(model.position[1 : n + 1]),
    }

    def fixed(x: np.ndarray) -> np.ndarray:
        return round_significant(x, floor=float(np.abs(x).max()))

    arrays = {
        "table_proximity": fixed(rows[0].proximities[0]),
        "head_logits": fixed(logits),
        "head_attention": fixed(attention),
    }
    return rows, summary, arrays


if __name__ == "__main__":
    from pipeline.stages._cli import stage_main

    stage_main("encode", run)
