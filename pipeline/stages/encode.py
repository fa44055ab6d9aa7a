"""Stage encode: the positional encoding (sinusoidal, or a seeded learned table), its diagnostics and their figures.
It depends on the encoding's config and the GloVe dimension only: the texts' embedding matrix is the sweep stage's,
RoPE's and ALiBi's diagnostics are the relative stage's, the tutorials' figures the tutorials stage's.

Writes data/encode/:
  pe.npy (max_len, d), encode.json (numbers reported as metrics);
  dot.npy, distance.npy: PE(a).PE(b) and ||PE(a) - PE(b)||, float32, full when max_len <= encoding.max_matrix_size,
      else exact f x f block means (f = ceil(max_len / max_matrix_size)) computed from the 1-D profiles:
      no max_len x max_len matrix is ever formed or written;
  matrices.json: encoding, layout, block side f, side, positions covered, whether the matrices are Toeplitz;
  profiles.npz (sinusoidal only): offset k = 0..max_len-1, dot(k), distance(k) over the sin/cos pairs, and for odd d the
      unpaired sine column u(p) (dot[a, b] = dot(|a-b|) + u(a) u(b); empty for even d);
and the property plots reports/plots/pe_norms.csv and reports/plots/offset_distance.csv.
The numbers are computed by pipeline.core.encode. The figures, reports/figures/encode/, are drawn by
pipeline.figures.folders' forked workers.

Reads params: encoding, glove.dim, the figure settings (registry FIGURE_KEYS); files: the GloVe store (its dimension).
"""

from __future__ import annotations

from typing import TYPE_CHECKING
import logging
from pathlib import Path

from pipeline.base.paths import Layout

if TYPE_CHECKING:
    from pipeline.config.schema import Config

log = logging.getLogger("pipeline")


def run(params: Config, layout: Layout, root: Path) -> dict:
    """The positional encoding and its diagnostics; returns the encoding's summary. The figure workers are forked
    first (before torch is imported here)."""
    from pipeline.figures.folders import draw_stage_figures, torch_threads

    def compute(figures) -> dict:
        from pipeline.core.device import resolve_device

        with torch_threads(figures):
            summary = encode_positions(params, layout, resolve_device(params.encoding.device))
            figures.queue("encoding")
        return summary

    return draw_stage_figures("encode", params, layout, compute)


def encode_positions(params: Config, layout: Layout, device) -> dict:
    """data/encode/ and the two property plots; returns the numbers of encode.json."""
    from pipeline.base.files import write_columns, write_json, write_npy, write_npz
    from pipeline.core import encode
    from pipeline.inputs.glove_store import GloveStore

    cfg = params.encoding
    store = GloveStore.open(layout.glove_dir, verify=True)
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


if __name__ == "__main__":
    from pipeline.stages._cli import stage_main

    stage_main("encode", run)
