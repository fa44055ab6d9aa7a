"""The crossover study: the same exact r* as the sweep for the same sentence, reproducible random sentences,
honest summaries, dimensions without a store reported, and only declared params and files read."""

from __future__ import annotations

import json

import numpy as np

from conftest import params_for, run_stages, typed
from pipeline.base.files import read_columns
from pipeline.core import study


def test_random_sentences_are_reproducible_distinct_and_per_length():
    vocabulary = [f"w{i}" for i in range(50)]
    a = study.random_sentences(vocabulary, 4, [5, 11], seed=0)
    b = study.random_sentences(vocabulary, 4, [11], seed=0)
    assert a[11] == b[11]  # a length's draw ignores the other lengths
    assert a == study.random_sentences(vocabulary, 4, [5, 11], seed=0)
    assert a != study.random_sentences(vocabulary, 4, [5, 11], seed=1)
    assert all(len(s) == n and len(set(s)) == n for n, group in a.items() for s in group)


def test_vocabulary_keeps_the_most_frequent_alphabetic_words():
    assert study.study_vocabulary(["the", ",", "of", "1990", "u.s.", "café", "and", "to"], 3) == ["the", "of", "and"]


def test_distribution_of_known_values():
    stats = study.distribution([1.0, 2.0, 3.0, 4.0, None], [1.0, 1.0, 0.0, 1.0, 1.0], [1, 1, 3, 1, 0])
    assert stats == {
        "sentences": 5,
        "median": 2.5,
        "q1": 1.75,
        "q3": 3.25,
        "min": 1.0,
        "max": 4.0,
        "beyond_grid": 1,
        "multiple_switches": 1,
        "sqrt_d_semantic_share": 0.8,
    }
    assert study.distribution([None], [1.0], [0])["median"] is None


def one_at_a_time(e: np.ndarray, p: np.ndarray, neighbours: int, ratios: np.ndarray) -> dict:
    """The sweep's crossover of one sentence (pipeline.core.sweep, as the sweep stage computes it for a text)."""
    import math

    from pipeline.core.metrics import Reference, knn_scores, pairwise_distances, valid_neighbours
    from conftest import exact_crossover, positional_wins_at

    ref = Reference(e, p, [], [], valid_neighbours(neighbours, len(e)))
    semantic, positional = knn_scores(pairwise_distances(1.0 * e + ratios[:, None, None] * p), ref)
    found = exact_crossover(ratios, {"knn_semantic_hd": semantic, "knn_positional_hd": positional}, ref)
    return {
        "r_star": found["r_star"],
        "switches": len(found["switch_points"]),
        "sqrt_d_semantic": float(not positional_wins_at(ref)(1 / math.sqrt(e.shape[1]))),
    }


def test_batched_crossovers_are_the_sweeps_one_sentence_at_a_time_to_the_bit(monkeypatch):
    """study.crossovers measures many sentences at once, in chunks, with the bisections in lockstep: every r*,
    switch count and sqrt_d verdict must equal the sweep's own computation of each sentence alone (==, not approx),
    for sentences with several switches, none on the grid, and position winning from the grid's first ratio."""
    from pipeline.core import sweep
    from pipeline.core.encoding import sinusoidal_encoding
    from pipeline.config.schema import RatiosConfig
    from pipeline.core.sweep import ratio_grid

    ratios = ratio_grid(RatiosConfig(min=0.01, max=100.0, points=41))
    rng = np.random.default_rng(0)
    pe = sinusoidal_encoding(40, 16).double().numpy()
    seen = []
    for n, k, scale in ((6, 1, 0.3), (9, 3, 1.0), (5, 2, 1e3), (5, 2, 1e-4)):
        e = rng.normal(scale=scale, size=(40, n, 16))
        positions = np.stack([np.sort(rng.choice(40, size=n, replace=False)) for _ in range(40)])
        positions[:10] = np.arange(n)  # random sentences sit at 0..n-1; a texts file's need not
        p = pe[positions]
        expected = [one_at_a_time(e[s], p[s], k, ratios) for s in range(len(e))]
        chunk = sweep.CHUNK_BYTES
        monkeypatch.setattr(sweep, "CHUNK_BYTES", 16 * 41 * n * (n + 16) * 3)  # 3 sentences a chunk
        assert study.crossovers(e, p, k, ratios) == expected
        monkeypatch.setattr(sweep, "CHUNK_BYTES", chunk)
        assert study.crossovers(e, p, k, ratios) == expected
        seen += expected
    assert sum(r["switches"] > 1 for r in seen) >= 1
    assert sum(r["r_star"] is None for r in seen) >= 10 and sum(r["r_star"] == ratios[0] for r in seen) >= 10
    assert {r["sqrt_d_semantic"] for r in seen} == {0.0, 1.0}
    assert study.crossovers(np.empty((0, 4, 16)), pe[:4], 3, ratios) == []


def test_sentence_crossover_is_the_sweeps(tmp_path, small_store, monkeypatch):
    """The study's r* of the seed's two sentences (given as its texts file) is the sweep's, to the written digit;
    a store of another dimension in data/cache/stores/ is studied too, and a dimension without a store is listed
    with how to get one."""
    from test_architecture import check_reads, run_recorded

    from pipeline.inputs.glove_store import GloveStore, write_store
    from pipeline.stages.registry import BY_NAME

    monkeypatch.setenv("PE_PROJECT_ROOT", str(tmp_path))  # the project whose data/cache/stores/ is searched
    small = GloveStore.open(small_store)
    wider = np.random.default_rng(7).normal(size=(len(small.words), 12)).astype(np.float32)
    write_store(tmp_path / "data" / "cache" / "stores" / "test-12d", wider, small.words, {"source": "test"})
    texts = tmp_path / "data" / "texts" / "seed.txt"
    texts.parent.mkdir(parents=True)
    params = params_for(
        "figures=none",  # the stages' figures are not looked at here; the study's own is drawn whatever the set
        "study.sentences=3",
        "study.lengths=[4,6]",
        "study.vocabulary=15",
        "study.dims=[8,12,7]",
        "study.texts_file=data/texts/seed.txt",
    )
    texts.write_text("\n".join(params["texts"]["sentences"]) + "\n")
    layout = run_stages(params, tmp_path, small_store)
    check_reads(BY_NAME["study"], run_recorded(BY_NAME["study"], params, tmp_path, small_store))

    swept = json.loads(layout.metrics.read_text())["crossover"]
    summary = json.loads(layout.study_summary.read_text())
    table = read_columns(layout.study_table)
    from_file, d8 = table["from_file"] == 1, table["d"] == 8
    assert table["r_star"][from_file & d8].tolist() == [swept["s0"]["r_star"], swept["s1"]["r_star"]]
    assert sorted(set(table["d"].tolist())) == [8, 12] and np.sum(~from_file & d8) == 6 and len(table["d"]) == 16
    assert summary["dims"]["d8"]["random"]["sentences"] == 6 and set(summary["dims"]["d8"]["by_length"]) == {"L4", "L6"}
    assert summary["dims"]["d12"]["file"]["sentences"] == 2
    assert "glove=6B-7d" in summary["missing_dims"]["d7"] and list(summary["stores"]) == ["d8", "d12"]
    assert layout.study_figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_study_always_covers_the_configured_store_and_skips_lengths_it_cannot_fill(tmp_path, small_store):
    """Dimensions without a store are listed as missing, never an error: the configured store (here 8-d) is studied
    whatever study.dims says; lengths longer than the store's vocabulary are skipped and recorded, the others run."""
    from pipeline.base.paths import Layout
    from pipeline.inputs.glove_store import GloveStore
    from pipeline.stages.registry import BY_NAME

    words = len([w for w in GloveStore.open(small_store).words if w.isalpha()])
    too_long = words + 1
    params = params_for(
        "study.dims=[7]",
        "study.texts_file=null",
        "study.sentences=2",
        f"study.lengths=[3,{too_long}]",
        f"study.vocabulary={too_long}",
    )
    summary = BY_NAME["study"].run(typed(params), Layout(tmp_path, glove=small_store), tmp_path)
    assert list(summary["stores"]) == ["d8"] and "glove=6B-7d" in summary["missing_dims"]["d7"]
    assert summary["skipped_lengths"] == [too_long]
    assert set(summary["dims"]["d8"]["by_length"]) == {"L3"} and summary["dims"]["d8"]["random"]["sentences"] == 2


def test_the_study_writes_the_same_bytes_whatever_the_number_of_workers(tmp_path, small_store, monkeypatch):
    """The sentences are split into parts measured by forked workers (one per core), the longest first: the files
    are the same bytes as when this process measures every part itself, in order (one core), with two dimensions."""
    from pipeline.base import worker_pool
    from pipeline.base.paths import Layout
    from pipeline.inputs.glove_store import GloveStore, write_store
    from pipeline.stages.registry import BY_NAME

    monkeypatch.setenv("PE_PROJECT_ROOT", str(tmp_path))
    small = GloveStore.open(small_store)
    wider = np.random.default_rng(3).normal(size=(len(small.words), 12)).astype(np.float32)
    write_store(tmp_path / "data" / "cache" / "stores" / "test-12d", wider, small.words, {"source": "test"})
    params = params_for(
        "study.sentences=7",
        "study.lengths=[3,5,6]",
        "study.vocabulary=15",
        "study.dims=[8,12]",
        "study.texts_file=null",
    )
    written = {}
    for workers in (1, 3):
        monkeypatch.setattr(worker_pool, "usable_cores", lambda workers=workers: workers)
        layout = Layout(tmp_path / f"w{workers}", glove=small_store)
        summary = BY_NAME["study"].run(typed(params), layout, tmp_path)
        written[workers] = [path.read_bytes() for path in (layout.study_table, layout.study_summary)]
    assert list(summary["stores"]) == ["d8", "d12"] and summary["dims"]["d12"]["random"]["sentences"] == 21
    assert written[1] == written[3]
