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
    from pipeline.config.schema import Config, EncodingConfig, RelativeConfig

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
            family_properties(params.relative, params.encoding, params.glove.dim, layout)
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


def family_properties(rel: RelativeConfig, encoding: EncodingConfig, d_model: int, layout: Layout) -> dict:
    """reports/properties.json (every family x the literature's properties, the RoPE scalings' summary) and
    data/families/scalings.npz (pipeline.core.relative); returns the JSON."""
    import torch

    from pipeline.base.files import write_json, write_npz
    from pipeline.core import alibi
    from pipeline.core.encoding import sinusoidal_encoding
    from pipeline.core.random_tables import learned_position_table
    from pipeline.core.relative import distance_grid, family_proximities, properties_table, scaling_diagnostics

    n, seed = rel.properties.positions, rel.properties.seed
    sinusoids = {
        name: sinusoidal_encoding(n, d_model, encoding.base, layout=name, dtype=torch.float64).numpy()
        for name in ("interleaved", "concatenated")
    }
    learned = learned_position_table(n, d_model, seed, dtype=torch.float64).numpy()
    biases = alibi.bias(alibi.slopes(rel.alibi.heads[0]), n, causal=rel.alibi.causal).numpy()
    table = properties_table(family_proximities(rel, sinusoids, learned, biases))
    arrays, scalings = scaling_diagnostics(rel, distance_grid(rel.rope.max_distance))
    layout.families_dir.mkdir(parents=True, exist_ok=True)
    write_npz(layout.scaling_arrays, arrays)
    summary = {"positions": n, "d_model": d_model, "d_head": rel.rope.d_head, "families": table}
    write_json(layout.properties_metrics, {**summary, "rope_scalings": scalings})
    log.info("properties: %d families x %d properties at N = %d positions", len(table), 5, n)
    return summary


if __name__ == "__main__":
    from pipeline.stages._cli import stage_main

    stage_main("encode", run)
