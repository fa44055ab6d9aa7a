"""The stages in-process on a small synthetic GloVe store: seed outputs, and one clear error per bad input."""

from __future__ import annotations

import logging
import math
import re

import numpy as np
import pytest

from conftest import DIM, SEED_WORDS, model_figures, params_for, run_stages, typed
from pipeline.base.errors import PipelineError
from pipeline.base.paths import Layout


def test_seed_sentences_through_sweep(tmp_path, small_store):
    """The seed's tokens, an embedding matrix with the store's rows, PE diagnostics, 5 projections per sentence."""
    from pipeline.base.files import read_json

    layout = run_stages(params_for("figures=none"), tmp_path, small_store)
    tokens = read_json(layout.tokens)
    assert tokens["word_index"] == {w: i + 1 for i, w in enumerate(SEED_WORDS)}
    assert tokens["sequences"] == [list(range(1, 12)), [3, 2, 11, 8, 10, 5, 4, 7, 1, 9, 6]]
    assert np.array(tokens["padded"]).shape == (2, 100) and tokens["positions"][1] == list(range(11))
    emb = np.load(layout.embedding_matrix)
    assert emb.shape == (12, DIM) and not emb[0].any()
    from pipeline.inputs.glove_store import GloveStore

    store = GloveStore.open(small_store)
    np.testing.assert_array_equal(emb[2], store.vectors[store.index["queen"]])
    metrics = read_json(layout.metrics)
    assert metrics["embedding"]["oov_count"] == 0
    assert math.isclose(metrics["encoding"]["norm_expected"], 2.0)
    assert metrics["encoding"]["norm_max_abs_dev"] < 1e-6  # the float32 table's rounding (3e-8 an entry)
    assert set(metrics["sweep"]["s0"]) == {"w1_1-w2_0", "w1_1-w2_1", "w1_1-w2_10", "w1_10-w2_1", "w1_sqrt_d-w2_1"}
    assert metrics["sweep"]["s0"]["w1_1-w2_0"]["pca_disparity"] == 0.0
    # the pure-embedding projection of both sentences is the same point set (order does not matter to GloVe)
    arrays = np.load(layout.sweep_dir / "projections.npz")
    s0, s1 = arrays["s0_coords"][0], arrays["s1_coords"][0]
    order = [SEED_WORDS.index(w) for w in read_json(layout.sweep_dir / "projections.json")["sentences"][1]["words"]]
    # ours on both sides (the same bits on every machine): rows in another order sum in another order, then both
    # are rounded to 12 significant digits (~1e-11 here)
    np.testing.assert_allclose(s1, s0[order], atol=1e-9)
    # position dominates at W2=10 more than at W2=1
    assert metrics["sweep"]["s1"]["w1_1-w2_10"]["pca_disparity"] > metrics["sweep"]["s1"]["w1_1-w2_1"]["pca_disparity"]


def test_sweep_matches_sklearn_pca(tmp_path, small_store):
    from sklearn.decomposition import PCA

    layout = run_stages(params_for("figures=none"), tmp_path, small_store)
    emb = np.load(layout.embedding_matrix).astype(np.float64)
    pe = np.load(layout.encode_dir / "pe.npy").astype(np.float64)
    coords = np.load(layout.sweep_dir / "projections.npz")["s1_coords"]
    ids = [3, 2, 11, 8, 10, 5, 4, 7, 1, 9, 6]
    w1, w2 = 1.0, 10.0  # pair index 2 after the baseline and (1, 1)
    expected = PCA(n_components=2).fit_transform(w1 * emb[ids] + w2 * pe[:11])
    # ours is rounded to 12 significant digits of the largest coordinate (5e-11 below 100); scikit-learn's spread
    # is ~n eps ||G|| / gap on components with real gaps (tests/test_projection.py): far below 1e-8
    np.testing.assert_allclose(coords[2], expected, atol=1e-8)


def test_figures_stage_writes_every_figure(seed_figures):
    layout = seed_figures
    names = sorted(p.name for p in layout.figures_dir.glob("*/*.png"))
    # PE figures, RoPE and ALiBi, the families' 2 (and MiniLM's probe with .[models]), 5 pairs x 2 sentences, panels
    # + ratio curves, tutorials
    assert len(names) == 5 + 4 + 2 + model_figures() + 2 * 5 + 2 * 2 + 7
    assert {
        "pe_heatmap.png",
        "pe_dot_product.png",
        "pe_distance.png",
        "pe_norms.png",
        "pe_offset_distance.png",
        "projection_s1_w1_1-w2_10.png",
        "panels_s1.png",
        "ratio_sweep_s0.png",
    } <= set(names)
    assert all(next(layout.figures_dir.glob(f"*/{n}")).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for n in names)


def test_all_oov_sentence_is_refused(tmp_path, small_store):
    """The message names the sentence by its number, never by what it says (it may come from a private file)."""
    params = params_for("figures=none", "texts.sentences=[king queen man,zebra unicorn narwhal]")
    with pytest.raises(
        PipelineError, match=r"every word of sentence 1 \(counted from 0; 3 word\(s\)\) is missing"
    ) as err:
        run_stages(params, tmp_path, small_store)
    assert "zebra" not in str(err.value)


def test_partly_oov_sentence_gets_zero_rows_and_is_reported(tmp_path, small_store, caplog):
    from pipeline.base.files import read_json

    params = params_for("figures=none", "texts.sentences=[king zebra queen,man woman dog]")
    with caplog.at_level(logging.WARNING, logger="pipeline"):
        layout = run_stages(params, tmp_path, small_store)
    assert read_json(layout.projections_meta)["oov_words"] == ["zebra"]
    assert read_json(layout.metrics)["embedding"]["oov_count"] == 1
    emb = np.load(layout.embedding_matrix)
    assert not emb[read_json(layout.tokens)["word_index"]["zebra"]].any()
    assert "zebra" in caplog.text


def test_text_longer_than_maxlen_is_truncated_with_a_warning(tmp_path, small_store, caplog):
    from pipeline.base.files import read_json

    params = params_for(
        "figures=none",
        "tokenizer.maxlen=4",
        "tokenizer.truncating=post",
        "encoding.max_len=10",
        "texts.sentences=[king queen man woman dog wolf,red green yellow]",
    )
    with caplog.at_level(logging.WARNING, logger="pipeline"):
        layout = run_stages(params, tmp_path, small_store)
    tokens = read_json(layout.tokens)
    assert tokens["words"][0] == ["king", "queen", "man", "woman"] and tokens["truncated"] == [True, False]
    assert "tokenizer.maxlen=4" in caplog.text and "2 cut" in caplog.text
    assert "beyond encoding.max_len=10" in caplog.text  # the seed's probes at 34 and 70/72
    assert read_json(layout.encode_summary)["norm"] == {}


def test_one_token_sentence_is_refused(tmp_path, small_store):
    with pytest.raises(PipelineError, match=r"sentence 1 .* 1 token.* at least 2"):
        run_stages(params_for("figures=none", "texts.sentences=[king queen,wolf]"), tmp_path, small_store)


def test_max_len_shorter_than_padding_is_refused(tmp_path, small_store):
    with pytest.raises(PipelineError, match=r"encoding\.max_len = 50 .* tokenizer\.maxlen"):
        run_stages(params_for("figures=none", "encoding.max_len=50"), tmp_path, small_store)


def test_glove_dim_mismatch_with_the_store_is_refused(tmp_path, small_store):
    params = params_for("figures=none")
    params["glove"]["dim"] = 50
    with pytest.raises(PipelineError, match=r"glove\.dim = 50 .* 8 dimensions"):
        run_stages(params, tmp_path, small_store)


def test_missing_glove_path_is_refused(tmp_path):
    from pipeline.stages import glove

    params = params_for("glove.path=data/nonexistent/glove.txt")
    with pytest.raises(PipelineError, match=r"glove\.path .*no such file.*6B-50d"):
        glove.run(typed(params), Layout(tmp_path), tmp_path)
    assert not (tmp_path / "data" / "glove").exists()


def test_learned_encoding_runs_the_whole_sweep(tmp_path, small_store):
    """encoding=learned: a seeded random table in place of the sinusoid, compared by the same metrics."""
    from pipeline.base.files import read_json

    sinusoid = read_json(run_stages(params_for("figures=none"), tmp_path / "sin", small_store).metrics)
    learned_layout = run_stages(
        params_for("figures=none", "encoding=learned", "encoding.scale=1.2247"), tmp_path / "learned", small_store
    )
    learned = read_json(learned_layout.metrics)
    again = read_json(
        run_stages(
            params_for("figures=none", "encoding=learned", "encoding.scale=1.2247"), tmp_path / "again", small_store
        ).metrics
    )
    assert learned == again  # seeded: the same table, the same numbers
    assert learned["sweep"].keys() == sinusoid["sweep"].keys()
    assert learned["sweep"]["s1"]["w1_1-w2_10"] != sinusoid["sweep"]["s1"]["w1_1-w2_10"]
    assert learned["encoding"]["norm_max_abs_dev"] > 0.1  # a random table has no constant norm


@pytest.mark.slow
def test_more_sentences_than_figures_one_long_table_and_a_summary(tmp_path, small_store):
    """Three sentences, figures for two: the plot file and metrics.json hold the two (long format: a sentence
    column) and summarise the three; every sentence's metrics and curves are in the DVC-cached tables; the
    figures are those of the first two and the crossover figure shows all three; the report shows the first two and
    says that there are three. The seed's two sentences in the same place: no summary is left."""
    from pipeline.base.files import read_columns, read_json
    from test_figures_bounds import expected_figures

    three = params_for(
        "texts.sentences=[king queen man,dog wolf red,green yellow football basketball]", "figures.max_sentences=2"
    )
    layout = run_stages(three, tmp_path, small_store, upto="figures")
    metrics, points = read_json(layout.metrics), three["sweep"]["ratios"]["points"]
    assert list(metrics["crossover"]) == ["s0", "s1"] and metrics["sentences"]["count"] == 3
    headline = read_json(layout.headline_metrics)
    assert "r_star.s2" not in headline and headline["sentences"] == 3 and "r_star.median" in headline
    shown, every = read_columns(layout.ratio_sweep_csv), read_columns(layout.all_ratio_sweeps_csv)
    assert list(shown)[:3] == ["sentence", "r", "log10_r"] and set(shown) == set(every)
    assert set(shown) - {"sentence", "r", "log10_r"} == set(metrics["sweep"]["s0"]["w1_1-w2_1"])
    assert shown["sentence"].tolist() == [0] * points + [1] * points
    assert every["sentence"].tolist() == [0] * points + [1] * points + [2] * points
    np.testing.assert_array_equal(every["knn_semantic_hd"][: 2 * points], shown["knn_semantic_hd"])
    # both columns hold 12 significant digits: r (<= 100) within 5e-13 relative, log10 r (<= 2) within 5e-12;
    # numpy's log10 moves by an ulp by machine
    np.testing.assert_allclose(shown["log10_r"], np.log10(shown["r"]), atol=1e-10)
    table = read_columns(layout.sentence_metrics, ["sentence", "r_star", "w1_1-w2_1.pca_disparity"])
    assert table["sentence"].tolist() == [0, 1, 2]
    assert table["w1_1-w2_1.pca_disparity"][1] == metrics["sweep"]["s1"]["w1_1-w2_1"]["pca_disparity"]
    r_star = [metrics["crossover"][s]["r_star"] for s in ("s0", "s1")]
    np.testing.assert_array_equal(table["r_star"][:2], [np.nan if r is None else r for r in r_star])
    figures = {p.name for p in layout.sweep_figures_dir.iterdir()}
    assert {"ratio_sweep_s1.png", "crossover_all_sentences.png"} <= figures and "panels_s2.png" not in figures
    assert {p.stem for p in layout.figures_dir.glob("*/*.png")} == expected_figures(2) | {"crossover_all_sentences"}
    page = layout.report_html.read_text(encoding="utf-8")
    assert "The texts hold 3 sentences" in page and page.count("<h3>Sentence ") == 2
    assert 'alt="crossover r* of every sentence"' in page

    run_stages(params_for("figures=none"), tmp_path, small_store)  # the sweep stage reads figures.max_sentences only
    assert "sentences" not in read_json(layout.metrics) and "sentences" not in read_json(layout.headline_metrics)
    assert read_columns(layout.sentence_metrics, ["sentence"])["sentence"].tolist() == [0, 1]


def test_sweep_writes_projections_at_fixed_precision(tmp_path, small_store):
    """The saved projections are already rounded (rounding again changes nothing), and so are the metrics."""
    from pipeline.base.files import SIGNIFICANT_DIGITS, round_significant

    layout = run_stages(params_for("figures=none"), tmp_path, small_store)
    with np.load(layout.sweep_dir / "projections.npz") as arrays:
        for name in ("s0_coords", "s1_grid_coords"):
            coords = arrays[name]
            floor = np.abs(coords).max(axis=(1, 2), keepdims=True)
            assert np.array_equal(round_significant(coords, SIGNIFICANT_DIGITS, floor=floor), coords), name
        ratios = arrays["s0_grid_explained_variance_ratio"]
        assert np.array_equal(round_significant(ratios, floor=1.0), ratios)
    text = layout.metrics.read_text()
    numbers = [float(x) for x in re.findall(r"-?\d+\.\d+(?:e-?\d+)?", text)]
    assert numbers and all(float(round_significant(x, floor=1.0)) == x for x in numbers)


def test_npz_bytes_do_not_depend_on_the_python_patch_release(tmp_path):
    """write_npz forces no zip64 header on a small member: Python 3.11.2 and 3.11.7 write forced ones differently, so
    the same arrays gave other bytes (and another dvc.lock) on another patch release. Plain headers: version 20."""
    import zipfile

    from pipeline.base.files import write_npz

    write_npz(tmp_path / "a.npz", {"x": np.arange(10.0), "y": np.ones((2, 3), np.float32)})
    infos = zipfile.ZipFile(tmp_path / "a.npz").infolist()
    assert [(i.filename, i.create_version, i.extract_version, i.extra) for i in infos] == [
        ("x.npy", 20, 20, b""),
        ("y.npy", 20, 20, b""),
    ]
    assert np.array_equal(np.load(tmp_path / "a.npz")["x"], np.arange(10.0))
