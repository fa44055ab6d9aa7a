"""Stage sweep: W1 * word_embedding + W2 * positional_encoding for every weight pair and sentence, projected
to 2-D with PCA (pipeline.core.sweep).

Writes data/sweep/projections.npz + projections.json, reports/metrics.json (every metric), reports/headline.json
(the few DVC shows: pipeline.core.sweep.headline), and reports/plots/ratio_sweep/
(one CSV per sentence: the metrics against r = W2/W1; the folder is replaced, so no sentence of an older
config lingers).

Reads params: sweep, metrics, encoding.device; files: tokens.json, data/encode/ (encode.json, embeddings, PE).
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
    import numpy as np

    from pipeline.base.files import read_json, replace_dir, write_columns, write_json, write_npz
    from pipeline.core import sweep as sweep_lib
    from pipeline.core.device import resolve_device
    from pipeline.core.encode import summary_metrics

    tokens = read_json(layout.tokens)
    encoded = read_json(layout.encode_summary)
    embeddings = np.load(layout.embedding_matrix)
    pe = np.load(layout.pe_matrix, mmap_mode="r")
    result = sweep_lib.run_sweep(
        tokens,
        embeddings,
        pe,
        encoded["d_model"],
        params.sweep,
        params.metrics,
        resolve_device(params.encoding.device),
    )
    metrics = sweep_lib.metrics(result, summary_metrics(encoded))

    write_npz(layout.projections, sweep_lib.projection_arrays(result))
    write_json(layout.projections_meta, sweep_lib.projection_meta(result, tokens, encoded))
    write_json(layout.metrics, metrics)
    write_json(layout.headline_metrics, sweep_lib.headline(metrics))

    def write_ratio_sweep(folder: Path) -> None:
        # written into the temporary folder that replaces layout.ratio_sweep_dir: named as Layout names them
        for s in range(len(result.sentences)):
            write_columns(folder / layout.ratio_sweep_csv(s).name, sweep_lib.ratio_columns(result, s))

    replace_dir(layout.ratio_sweep_dir, write_ratio_sweep)
    log.info(
        "sweep: %d weight pairs + %d ratios x %d sentences; r* = %s",
        len(result.pairs),
        len(result.ratios),
        len(result.sentences),
        ", ".join(f"{c['r_star']:.3g}" if c["r_star"] else "beyond grid" for c in metrics["crossover"].values()),
    )
    return metrics


if __name__ == "__main__":
    from pipeline.stages._cli import stage_main

    stage_main("sweep", run)
