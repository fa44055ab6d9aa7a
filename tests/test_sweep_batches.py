"""The sweep of many sentences (pipeline.core.sweep): sentences of one length measured together get each sentence's
own bits, as swept alone, whatever the batch and chunk sizes; and the sweep and study stages run without torch."""

from __future__ import annotations

import math
import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import REPO, params_for, run_stages, stages_needed, sweep_sentence, typed
from pipeline.config import dump_params
from pipeline.core import sweep
from pipeline.core.study import sinusoid
from pipeline.core.weights import weight_pairs


def sentences(count: int, seed: int = 0) -> dict:
    """tokens.json-like sentences of 3 to 13 words (lengths mixed, in no order), each with its own GloVe-like random
    vectors of a scale that puts its crossover low, near 1 or beyond the grid, at the positions 0..n-1 or spread
    over 0..29 (real sinusoidal PE rows), words drawn from w0..w11 (repeats: grouped pairs of every shape)."""
    rng = np.random.default_rng(seed)
    d, lengths = 16, rng.choice([3, 4, 5, 9, 11, 13], size=count)
    scales = rng.choice([1e-4, 1e3, 1.0, 0.0], size=count)  # 0: each word its own scale
    rows, ids, positions = [np.zeros((1, d))], [], []
    for s, (n, scale) in enumerate(zip(lengths, scales)):
        ids.append(list(range(sum(map(len, ids)) + 1, sum(map(len, ids)) + 1 + n)))
        scale = scale or rng.choice([0.05, 0.5, 1.0, 4.0], size=(n, 1))
        rows.append(rng.normal(size=(n, d)) * scale)
        positions.append(np.sort(rng.choice(30, size=n, replace=False)).tolist() if s % 3 else list(range(n)))
    words = [[f"w{i}" for i in rng.integers(0, 12, size=n)] for n in lengths]
    pe = sinusoid(30, d, 1e4, "interleaved", "float32")
    return {"ids": ids, "positions": positions, "words": words, "embeddings": np.concatenate(rows), "pe": pe}


def same(a: sweep.SentenceSweep, b: sweep.SentenceSweep) -> None:
    """Every array of two sentence sweeps has the same bytes; every number in their dicts is the same float."""
    for name in ("coords", "explained", "grid_coords", "grid_explained"):
        assert getattr(a, name).tobytes() == getattr(b, name).tobytes(), name
    assert a.curves.keys() == b.curves.keys()
    assert all(a.curves[key].tobytes() == b.curves[key].tobytes() for key in a.curves)
    assert repr(a.pairs) == repr(b.pairs) and repr(a.scaling) == repr(b.scaling)  # repr: nan is nan, -0.0 not 0.0
    assert a.crossover == b.crossover


@pytest.mark.slow
def test_sentences_swept_together_have_each_sentences_own_bits(monkeypatch):
    """run_sweep measures the sentences of one length together: every sentence's projections, metrics, curves,
    crossover and scaling have the bits it gets alone (sweep_sentence), also when the batches and the metrics'
    chunks are cut small; the results come back in the sentences' order."""
    data = sentences(60, seed=1)
    cfg = typed(params_for("sweep.w1=1", "sweep.w2=[1,10,0.3]", "metrics.groups=[[w0,w1],[w2,w3,w4]]"))
    pairs, ratios = weight_pairs(1, [1, 10, 0.3], d_model=16), sweep.ratio_grid(cfg.sweep.ratios)
    expected = [
        sweep_sentence(
            data["embeddings"][data["ids"][s]],
            data["pe"][data["positions"][s]],
            data["words"][s],
            pairs,
            ratios,
            16,
            cfg.metrics.groups,
            cfg.metrics.neighbours,
        )
        for s in range(60)
    ]
    cuts = ((256, sweep.CHUNK_BYTES, sweep.PROJECTION_WORK), (7, sweep.CHUNK_BYTES, 5000), (256, 40_000, 1))
    for at_once, chunk, work in cuts:
        monkeypatch.setattr(sweep, "SENTENCES_AT_ONCE", at_once)
        monkeypatch.setattr(sweep, "CHUNK_BYTES", chunk)
        monkeypatch.setattr(sweep, "PROJECTION_WORK", work)
        result = sweep.run_sweep(data, data["embeddings"], data["pe"], 16, cfg.sweep, cfg.metrics)
        assert len(result.sentences) == 60
        for s in range(60):
            same(result.sentences[s], expected[s])
    crossings = [sentence.crossover for sentence in expected]
    assert sum(len(c["switch_points"]) > 1 for c in crossings) >= 1  # several switches in one sentence
    assert {c["r_star"] is None for c in crossings} == {True, False}  # some never cross on the grid
    grouped = [e.pairs["w1_1-w2_1"]["group_distance_ratio_hd"] for e in expected]
    assert 10 <= sum(not math.isnan(g) for g in grouped) < 60  # sentences with and without grouped words


def test_a_long_sentences_projections_go_in_parts_each_a_progress_step(monkeypatch):
    """Past PROJECTION_WORK a sentence's weightings are projected in parts, and past CHUNK_BYTES measured in chunks,
    each reported to the progress (a long sentence's take minutes), with the bits of one part."""
    rng = np.random.default_rng(3)
    e, p, words = rng.normal(size=(1, 13, 16)), rng.normal(size=(1, 13, 16)), [[f"w{i}" for i in range(13)]]
    pairs, ratios = weight_pairs(1, [1, 10], d_model=16), np.array([0.1, 1.0, 10.0])
    whole = sweep.sweep_sentences(e, p, words, pairs, ratios, 16, [["w0", "w1"]], 3)
    updates = []
    monkeypatch.setattr(sweep.Progress, "update", lambda self, done: updates.append((self.total, done)))
    monkeypatch.setattr(sweep, "PROJECTION_WORK", 2 * 13**3)  # two weightings a part
    monkeypatch.setattr(sweep, "CHUNK_BYTES", 3 * 16 * 13 * (13 + 16))  # three a chunk
    same(sweep.sweep_sentences(e, p, words, pairs, ratios, 16, [["w0", "w1"]], 3)[0], whole[0])
    # 7 weightings (3 pairs, the Transformer's scaling, 3 ratios) projected, then measured
    assert updates == [(14, 2), (14, 4), (14, 6), (14, 8), (14, 10), (14, 13), (14, 16)]


def test_sentence_batches_group_by_length_in_order_within_memory(monkeypatch):
    lengths = [5, 3, 5, 11, 3, 5]
    assert sweep.sentence_batches(lengths) == [[0, 2, 5], [1, 4], [3]]
    monkeypatch.setattr(sweep, "SENTENCES_AT_ONCE", 2)
    assert sweep.sentence_batches(lengths) == [[0, 2], [5], [1, 4], [3]]
    monkeypatch.setattr(sweep, "SENTENCES_AT_ONCE", 256)
    per_sentence = 16 * 47 * 5 * (5 + 50)  # 47 weightings of 5 words in 50-d
    monkeypatch.setattr(sweep, "CHUNK_BYTES", 2 * per_sentence)
    assert sweep.sentence_batches([5] * 5, pairs=47, d=50) == [[0, 1], [2, 3], [4]]
    monkeypatch.setattr(sweep, "CHUNK_BYTES", 1)
    assert sweep.sentence_batches([5] * 2, pairs=47, d=50) == [[0], [1]]  # never fewer than one


def test_numpy_sinusoid_is_the_encoding_cores_at_the_studys_sizes():
    """The study's sinusoid (numpy) has the bits of pipeline.core.encoding's (torch) in float32 up to 1,000
    positions and d = 300, both layouts; in float64 it agrees within 1e-12."""
    import torch

    from pipeline.core.encoding import sinusoidal_encoding

    for d in (7, 8, 50, 100, 200, 300):
        for layout in ("interleaved", "concatenated"):
            for base in (1e4, 500.0):
                ours = sinusoid(1000, d, base, layout, "float32")
                core = sinusoidal_encoding(1000, d, base, layout=layout, dtype=torch.float32).double().numpy()
                assert ours.tobytes() == core.tobytes(), (d, layout, base)
                ours = sinusoid(1000, d, base, layout, "float64")
                core = sinusoidal_encoding(1000, d, base, layout=layout, dtype=torch.float64).numpy()
                assert np.abs(ours - core).max() < 1e-12  # both portable: no machine spread, rounding only
    with pytest.raises(ValueError, match="layout"):
        sinusoid(4, 8, 1e4, "sideways", "float32")


# ---------------------------------------------------------------- no torch in the sweep and the study

PROBE = """
import runpy, sys
for stage in ("sweep", "study"):
    runpy.run_module(f"pipeline.stages.{stage}", run_name="__main__")
print("imported:", " ".join(m for m in ("torch", "sklearn", "mlflow") if m in sys.modules))
"""


def test_sweep_and_study_stages_import_no_torch(tmp_path, small_store):
    """The sweep and study stages, run as DVC runs them (python -m pipeline.stages.X in the project), import neither
    torch nor scikit-learn nor mlflow: a `sweep.*` edit does not pay their imports (issue 22)."""
    import shutil

    overrides = ("study.sentences=3", "study.lengths=[4]", "study.vocabulary=15", "study.dims=[8]")
    params = params_for(*overrides, "study.texts_file=null", "figures=none")
    for stage in stages_needed("sweep")[:-1]:  # the sweep's inputs (the encode stage uses torch)
        run_stages(params, tmp_path, small_store, upto=stage.name)
    shutil.copytree(small_store, tmp_path / "data" / "glove")
    shutil.copytree(REPO / "conf", tmp_path / "conf")  # params.yaml is checked against what composed it
    (tmp_path / "params.yaml").write_text(dump_params(params, None, tmp_path), encoding="utf-8")
    (tmp_path / "unused.txt").write_text(
        "king 1 2 3 4 5 6 7 8\n", encoding="utf-8"
    )  # glove.path: every stage checks it
    env = dict(os.environ, PE_PROJECT_ROOT=str(tmp_path), PYTHONPATH=str(REPO))
    out = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr
    assert "imported: \n" in out.stdout, out.stdout
    assert (tmp_path / "reports" / "metrics.json").is_file() and (tmp_path / "reports" / "study").is_dir()
