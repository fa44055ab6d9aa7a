"""Stage encode: everything that depends on the encoding's, RoPE's, ALiBi's and the tutorials' config and not on the
texts, with their figures, in one process (torch and the figure workers started once).

- The positional encoding (sinusoidal, or a seeded learned table) and its diagnostics, data/encode/ (pipeline.core.encode):
  pe.npy (max_len, d), encode.json (numbers reported as metrics);
  dot.npy, distance.npy: PE(a).PE(b) and ||PE(a) - PE(b)||, float32, full when max_len <= encoding.max_matrix_size,
      else exact f x f block means (f = ceil(max_len / max_matrix_size)) computed from the 1-D profiles:
      no max_len x max_len matrix is ever formed or written;
  matrices.json: encoding, layout, block side f, side, positions covered, whether the matrices are Toeplitz;
  profiles.npz (sinusoidal only): offset k = 0..max_len-1, dot(k), distance(k) over the sin/cos pairs, and for odd d
      the unpaired sine column u(p) (dot[a, b] = dot(|a-b|) + u(a) u(b); empty for even d);
  and the property plots reports/plots/pe_norms.csv and reports/plots/offset_distance.csv.
- RoPE's relative-position diagnostics (scores depend only on m - n; RoFormer's long-term decay bound for the base, a
  larger base, NTK-aware scaling and position interpolation) and ALiBi's slopes, biases and penalties
  (pipeline.core.relative): data/relative/rope.npz, data/relative/alibi.npz and reports/relative.json.
- The families' properties (pipeline.core.families): reports/properties.json, data/families/scalings.npz and, with the
  optional extra `.[models]`, data/families/minilm.npz.
- The tutorials' examples (pipeline.figures.tutorials) but the masks of the texts, which the figures stage draws.

The texts' embedding matrix is the sweep stage's. The figures, reports/figures/encode/, relative/ and tutorials/, are
drawn by pipeline.figures.folders' forked workers while this process computes the next part.

Reads params: encoding, glove.dim, relative, tutorials (registry TUTORIAL_KEYS), the figure settings (registry
FIGURE_KEYS, figures.max_heatmap_size); files: the GloVe store (its dimension).
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
    """The encoding and its diagnostics, RoPE's and ALiBi's, the families' properties and the tutorials' examples;
    returns the encoding's summary. The figure workers are forked first (before torch is imported here), and each
    part's figures are queued as soon as its data is written: the workers draw while this process computes the next."""
    from pipeline.figures.folders import draw_stage_figures, torch_threads

    def compute(figures) -> dict:
        from pipeline.core.device import resolve_device

        device = resolve_device(params.encoding.device)
        with torch_threads(figures):
            summary = encode_positions(params, layout, device)
            figures.queue("encoding")
            relative_diagnostics(params.relative, layout, device)
            figures.queue("relative")
            family_properties(params.relative, layout)
            figures.queue("properties")
            figures.queue("tutorials")
        return summary

    return draw_stage_figures(params, layout, compute)


def encode_positions(params: Config, layout: Layout, device) -> dict:
    """data/encode/ and the two property plots; returns the numbers of encode.json."""
    from pipeline.base.files import write_columns, write_json, write_npy, write_npz
    from pipeline.core import encode
    from pipeline.inputs.glove_store import GloveStore

    cfg = params.encoding
    store = GloveStore.open(layout.glove_dir)  # its dimension only: the sweep stage verifies the vectors it reads
    d = encode.model_dim(cfg, params.glove.dim, store.dim, layout.glove_dir)
    pe, diag = encode.position_table(cfg, d, device)
    summary = encode.summary(cfg, pe, diag)

    write_npy(layout.pe_matrix, pe.cpu().numpy())
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
    norm_columns, offset_columns = encode.property_columns(diag, summary["norm_expected"], cfg.name)
    write_columns(layout.pe_norms_csv, norm_columns)
    write_columns(layout.offset_distance_csv, offset_columns)
    log.info(
        "encode: PE %dx%d (%s) on %s; max |norm - sqrt(d/2)| = %.2e; max spread over p of "
        "||PE(p)-PE(p+k)|| = %.2e; matrices %dx%d (blocks of %d)",
        cfg.max_len,
        d,
        info["layout"] or cfg.name,
        device,
        summary["norm_max_abs_dev"],
        summary["offset_distance_max_spread"],
        info["side"],
        info["side"],
        info["block"],
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
