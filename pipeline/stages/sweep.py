"""Stage sweep: the embedding matrix of the texts' word index (GloVe rows), then W1 * word_embedding + W2 *
positional_encoding for every weight pair and sentence, projected to 2-D with PCA (pipeline.core.sweep).

Writes data/sweep/ (embeddings.npy (V + 1, d), projections.npz + projections.json, and ratio_sweep.csv: every
sentence's metrics against r = W2/W1, long format), reports/sentences.csv (every sentence's metrics, one row each; DVC-cached), and in git,
small for any number of sentences: reports/metrics.json (the summary: the first figures.max_sentences sentences,
the rest summarised), reports/headline.json (the few DVC shows: pipeline.core.sweep.headline) and
reports/plots/ratio_sweep.csv (the metrics against r of the sentences with figures, a sentence column).

Reads params: sweep, metrics, figures.max_sentences, glove.name; files: tokens.json, the GloVe store, data/encode/
(encode.json, PE). The embedding matrix is computed here, not by the encode stage, so that the encoding (and its
figures) does not depend on the texts. numpy only: no torch (encoding.device is the encode stage's; the sweep's
batched PCA runs on the CPU).
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

    from pipeline.base.words import counted
    from pipeline.base.files import read_json, write_columns, write_json, write_npz
    from pipeline.config import limits
    from pipeline.core import sweep as sweep_lib

    listed = params.figures.max_sentences
    tokens = read_json(layout.tokens)
    pe = np.load(layout.pe_matrix, mmap_mode="r")
    embeddings, missing = embed(tokens, params.glove.name, pe.shape[0], layout)
    encoded = {
        **read_json(layout.encode_summary),
        **sweep_lib.embedding_facts(params.glove.name, tokens["word_index"], missing),
    }
    limits.sweep_seconds(params, [len(ids) for ids in tokens["ids"]])  # says so before long work
    result = sweep_lib.run_sweep(
        tokens,
        embeddings,
        pe,
        encoded["d_model"],
        params.sweep,
        params.metrics,
    )
    metrics = sweep_lib.metrics(result, encoded)
    summary = sweep_lib.summary(metrics, listed)

    write_npz(layout.projections, sweep_lib.projection_arrays(result))
    write_json(layout.projections_meta, sweep_lib.projection_meta(result, tokens, encoded))
    write_columns(layout.all_ratio_sweeps_csv, sweep_lib.ratio_columns(result))
    write_columns(layout.sentence_metrics, sweep_lib.sentence_table(metrics))
    write_json(layout.metrics, summary)
    write_json(layout.headline_metrics, sweep_lib.headline(summary))
    write_columns(layout.ratio_sweep_csv, sweep_lib.ratio_columns(result, listed))
    log.info(
        "sweep: %s + %s x %s; %s",
        counted(len(result.pairs), "weight pair"),
        counted(len(result.ratios), "ratio"),
        counted(len(result.sentences), "sentence"),
        crossover_line(summary),
    )
    return summary


def embed(tokens: dict, glove: str, max_len: int, layout: Layout):
    """The (V + 1, d) embedding matrix of the word index (written to data/sweep/embeddings.npy) and the words GloVe
    lacks; refuses sentences longer than the encoding (max_len positions) and sentences whose every word is missing."""
    from pipeline.base.files import write_npy
    from pipeline.core.sweep import check_max_len
    from pipeline.inputs.glove_store import GloveStore, check_sentences_covered, embedding_matrix

    check_max_len(max_len, len(tokens["padded"][0]))
    matrix, missing = embedding_matrix(tokens["word_index"], GloveStore.open(layout.glove_dir, verify=True))
    check_sentences_covered(tokens["texts"], tokens["words"], missing, glove)
    if missing:
        log.warning("sweep: %d word(s) not in GloVe get zero vectors: %s", len(missing), ", ".join(missing[:20]))
    layout.sweep_dir.mkdir(parents=True, exist_ok=True)
    write_npy(layout.embedding_matrix, matrix)
    return matrix, missing


def crossover_line(summary: dict) -> str:
    """r* of each sentence, or of the listed ones and the summary of all (a log line stays short)."""
    listed = ", ".join(f"{c['r_star']:.3g}" if c["r_star"] else "beyond grid" for c in summary["crossover"].values())
    if "sentences" not in summary:
        return f"r* = {listed}"
    many = summary["sentences"]
    median = "none on the grid" if many["r_star_median"] is None else f"median {many['r_star_median']:.3g}"
    return (
        f"r* of the first {many['listed']}: {listed}; of all {many['count']}: {median}, "
        f"{many['r_star_beyond_grid']} beyond the grid (reports/sentences.csv)"
    )


if __name__ == "__main__":
    from pipeline.stages._cli import stage_main

    stage_main("sweep", run)
