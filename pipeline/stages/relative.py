"""Stage relative: the encodings long-context models use instead of an added sinusoid, measured beside it.
RoPE's relative-position diagnostics (scores depend only on m - n; RoFormer's long-term decay bound for the base, a
larger base, NTK-aware scaling and position interpolation) and ALiBi's slopes, biases and penalties, computed by
pipeline.core.relative.

Writes data/relative/rope.npz, data/relative/alibi.npz (the figures' data) and reports/relative.json (the numbers;
kept out of headline.json).

Reads params: relative, encoding.device; files: none (after check_params).
"""

from __future__ import annotations

import logging
from pathlib import Path

from pipeline.base.paths import Layout

log = logging.getLogger("pipeline")


def run(params: dict, layout: Layout, root: Path) -> dict:
    from pipeline.base.files import write_json, write_npz
    from pipeline.core.device import resolve_device
    from pipeline.core.relative import alibi_diagnostics, rope_diagnostics

    cfg = params["relative"]
    device = resolve_device(params["encoding"]["device"])
    rope_arrays, rope_summary = rope_diagnostics(cfg["rope"], device)
    alibi_arrays, alibi_summary = alibi_diagnostics(cfg["alibi"], device)
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


if __name__ == "__main__":
    from pipeline.stages._cli import stage_main

    stage_main("relative", run)
