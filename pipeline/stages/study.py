"""Stage study: the exact crossover r* of many sentences, per GloVe dimension (pipeline.core.study).

Sentences: study.sentences random sentences for each of study.lengths (distinct words drawn from the
study.vocabulary most frequent alphabetic words of the configured GloVe store, seeded), and the sentences of
study.texts_file (tokenized as configured). Dimensions: each of study.dims with a GloVe 6B store here: the
configured one (data/glove/), and stores already built under data/cache/stores/ (by a Hydra job with
glove=6B-100d, ...: those are not DVC dependencies; the vectors' SHA-256 of each store used is recorded, and
`dvc repro -f study` takes in a store added later). Dimensions without a store are listed with how to get one.
Encoding: the sinusoid with encoding.base, encoding.layout and encoding.dtype, positions 0..n-1 (in numpy,
pipeline.core.study.sinusoid: the stage imports no torch). The sentences are measured by forked workers, one per
core (a sentence's r* has the same bits whichever part it is measured in), while this process imports matplotlib for
the figure, for speed (docs/benchmarks-measurements.md#process-start-and-exit).

Writes reports/study/ (replaced whole): crossover.json (the distribution), r_star.csv (every sentence),
crossover_study.png (the figure, pipeline.figures.study).

Reads params: study, tokenizer, encoding.base/layout/dtype, sweep.ratios, metrics.neighbours, figures.dpi;
files: the GloVe store, study.texts_file (under data/texts/).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable
import logging
from pathlib import Path

from pipeline.base.paths import Layout

if TYPE_CHECKING:
    from pipeline.config.schema import Config

log = logging.getLogger("pipeline")


def find_stores(dims: list[int], layout: Layout, root: Path) -> tuple[dict, dict, list[int]]:
    """{d: GloveStore} for the configured store's dimension and those of `dims` that have a store here, {d: why
    missing}, and every dimension with a store here."""
    from pipeline.base.paths import download_cache
    from pipeline.inputs.glove_store import MANIFEST, GloveStore

    configured = GloveStore.open(layout.glove_dir, verify=True)
    found = {configured.dim: configured}
    cache = download_cache(root) / "stores"
    for manifest in sorted(cache.glob(f"*/{MANIFEST}")) if cache.is_dir() else []:
        store = GloveStore.open(manifest.parent, verify=True)
        found.setdefault(store.dim, store)
    # the configured store is always studied: a run of any GloVe source has its own dimension's distribution
    stores = {d: found[d] for d in sorted(set(dims) | {configured.dim}) if d in found}
    missing = {
        d: (
            f"no {d}-d GloVe store here: build one with `python -m pipeline glove=6B-{d}d` (downloads the "
            "official zip into data/cache/), then `dvc repro -f study`"
        )
        for d in dims
        if d not in found
    }
    return stores, missing, sorted(found)


def run(params: Config, layout: Layout, root: Path) -> dict:
    from pipeline.base import worker_pool

    cfg = params.study
    cores = worker_pool.usable_cores()
    stores, missing, _ = find_stores(list(cfg.dims), layout, root)
    lengths, skipped, sentences, texts, file_tokens = _sentences(params, stores, root)
    cases, encodings = _cases(params, stores, lengths, sentences, file_tokens)
    results, crossover_study = _measure(params, stores, cases, encodings, cores)
    rows = []
    for d in sorted(cases):
        for (length, from_file, s, _, _), result in zip(cases[d], results[d]):
            rows.append({"d": d, "length": length, "from_file": from_file, "sentence": s, **result})
        log.info("study: d=%d, %d sentences", d, len(cases[d]))
    summary = _summary(params, stores, missing, skipped, texts, rows, root)
    _write(layout, rows, summary, crossover_study, params.figures.dpi)
    _log_summary(summary)
    return summary


def _sentences(params: Config, stores: dict, root: Path) -> tuple[list[int], list[int], dict, list[str], tuple]:
    """The lengths studied and those skipped, the random sentences ({length: [words, ...]}), the texts file's
    sentences and their (words, positions) as tokenized."""
    from pipeline.core import study as study_lib
    from pipeline.inputs.texts import read_sentences
    from pipeline.inputs.tokens import tokenize

    cfg = params.study
    first = stores[min(stores)]
    vocabulary = study_lib.study_vocabulary(first.words, cfg.vocabulary)
    # a small store (a test's or a custom one) cannot fill the longest sentences: those lengths are skipped, and said
    lengths = [n for n in cfg.lengths if n <= len(vocabulary)]
    skipped = [n for n in cfg.lengths if n > len(vocabulary)]
    if skipped:
        log.warning(
            "study: lengths %s skipped: the %d-d store has %d alphabetic words (study.vocabulary = %d)",
            skipped,
            first.dim,
            len(vocabulary),
            cfg.vocabulary,
        )
    sentences = study_lib.random_sentences(vocabulary, cfg.sentences, lengths, cfg.seed)
    file_words, file_positions, texts = [], [], []
    if cfg.texts_file is not None:
        texts = read_sentences(cfg.texts_file, root, "study.texts_file")
        tokens = tokenize(texts, params.tokenizer)
        file_words, file_positions = tokens["words"], tokens["positions"]
    return lengths, skipped, sentences, texts, (file_words, file_positions)


def _cases(params: Config, stores: dict, lengths: list[int], sentences: dict, file_tokens: tuple) -> tuple[dict, dict]:
    """{d: [(length, from_file, index, words, positions), ...]} and {d: the sinusoid of the longest position}."""
    from pipeline.core import study as study_lib

    enc = params.encoding
    file_words, file_positions = file_tokens
    longest = max([*lengths, 1] + [max(p) + 1 for p in file_positions if p])
    cases, encodings = {}, {}
    for d in sorted(stores):
        encodings[d] = study_lib.sinusoid(longest, d, enc.base, enc.layout, enc.dtype)
        cases[d] = [
            (length, False, s, words, list(range(length)))
            for length, group in sentences.items()
            for s, words in enumerate(group)
        ]
        cases[d] += [
            (len(words), True, s, words, positions)
            for s, (words, positions) in enumerate(zip(file_words, file_positions))
        ]
    return cases, encodings


def _measure(params: Config, stores: dict, cases: dict, encodings: dict, cores: int) -> tuple[dict, Callable]:
    """{d: [each case's crossover result]}, computed by forked workers; and the figure function, imported meanwhile."""
    import numpy as np

    from pipeline.base import worker_pool
    from pipeline.base.progress import Progress
    from pipeline.core import study as study_lib
    from pipeline.core.sweep import ratio_grid, sentence_batches

    ratios, neighbours = ratio_grid(params.sweep.ratios), params.metrics.neighbours
    # sentences of one length go through together (pipeline.core.study.crossovers), grouped as the sweep groups them,
    # each group split in parts for the workers, the longest sentences first (so that the workers finish together)
    parts = [
        (d, part.tolist())
        for d in cases
        for batch in sentence_batches([len(case[3]) for case in cases[d]])
        for part in np.array_split(np.array(batch), min(len(batch), 2 * cores))
    ]
    parts.sort(key=lambda part: -cases[part[0]][part[1][0]][0])

    def tasks():  # built as the workers take them (worker_pool.imap): memory stays bounded
        for d, part in parts:
            e = np.stack([np.asarray(stores[d].lookup(cases[d][i][3])[0], dtype=np.float64) for i in part])
            p = np.stack([encodings[d][cases[d][i][4]] for i in part])
            yield e, p, neighbours, ratios

    results = {d: [None] * len(group) for d, group in cases.items()}
    with worker_pool.imap(study_lib.crossovers_of, tasks(), cores if cores > 1 else 0) as answers:
        # imported while the workers compute: matplotlib's import overlaps their work
        from pipeline.figures.study import crossover_study

        progress = Progress("study: sentences", sum(len(group) for group in cases.values()))
        done = 0
        for (d, part), answer in zip(parts, answers):
            for i, one in zip(part, answer):
                results[d][i] = one
            done += len(part)
            progress.update(done)
    return results, crossover_study


def _summary(
    params: Config, stores: dict, missing: dict, skipped: list[int], texts: list[str], rows: list[dict], root: Path
) -> dict:
    """reports/study/crossover.json: the distribution per dimension, the stores used, what is missing or skipped."""
    from pipeline.core import study as study_lib

    return {
        "dims": study_lib.summarize(rows),
        "stores": {
            f"d{d}": {
                "path": str(store.path.relative_to(root) if store.path.is_relative_to(root) else store.path),
                "origin": store.manifest.get("origin", {}).get("name"),
                "vectors_sha256": store.manifest["vectors_sha256"],
            }
            for d, store in sorted(stores.items())
        },
        "missing_dims": {f"d{d}": why for d, why in sorted(missing.items())},
        "skipped_lengths": skipped,
        "texts_file": {"file": params.study.texts_file, "sentences": texts},
        "neighbours": params.metrics.neighbours,
    }


def _write(layout: Layout, rows: list[dict], summary: dict, crossover_study: Callable, dpi: int) -> None:
    """reports/study/, replaced whole: the summary, the table of every sentence, the figure."""
    from pipeline.base.files import replace_dir, write_columns, write_json

    def build(folder: Path) -> None:
        write_json(folder / layout.study_summary.name, summary)
        write_columns(
            folder / layout.study_table.name,
            {
                "d": [r["d"] for r in rows],
                "length": [r["length"] for r in rows],
                "from_file": [int(r["from_file"]) for r in rows],
                "sentence": [r["sentence"] for r in rows],
                "r_star": [r["r_star"] for r in rows],
                "switches": [r["switches"] for r in rows],
                "sqrt_d_semantic": [r["sqrt_d_semantic"] for r in rows],
            },
        )
        crossover_study(rows, summary["dims"], folder / layout.study_figure.name, dpi=dpi)

    replace_dir(layout.study_dir, build)


def _log_summary(summary: dict) -> None:
    for key, stats in summary["dims"].items():
        random = stats["random"]
        log.info(
            "study %s: r* median %s (quartiles %s..%s) over %d random sentences; meaning wins at 1/sqrt(d) for %s",
            key,
            _fmt(random["median"]),
            _fmt(random["q1"]),
            _fmt(random["q3"]),
            random["sentences"],
            _fmt(random["sqrt_d_semantic_share"]),
        )
    for key, why in summary["missing_dims"].items():
        log.info("study %s: %s", key, why)


def _fmt(value) -> str:
    return "-" if value is None else f"{value:.4g}"


if __name__ == "__main__":
    from pipeline.stages.registry import BY_NAME
    from pipeline.stages._cli import stage_main

    stage_main("study", run, input_files=BY_NAME["study"].input_files)
