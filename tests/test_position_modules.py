"""Position-embedding modules (tutorial 001), the learned table, and tutorial 002's example."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from pipeline.core.encoding import sinusoidal_encoding
from pipeline.base.errors import PipelineError
from pipeline.tutorials.position_modules import (
    FixedPositionEmbedding,
    PositionEmbedding,
    learned_position_table,
    random_embedding_with_pe,
)
from pipeline.tutorials.text_vectorization import TextVectorization

ROBOT_IDS = torch.tensor([[5, 6, 7, 2, 0], [3, 4, 2, 0, 0]])

# Tutorial 001's printed output of PositionEmbeddingFixedWeights(5, 10, 6) on ROBOT_IDS.
TUTORIAL_001_FIXED = [
    [
        [-0.9589243, 1.2836622, 0.23000172, 1.9731903, 0.01077196, 1.9999421],
        [0.56205547, 1.5004725, 0.3213085, 1.9603932, 0.01508068, 1.9999142],
        [1.566284, 0.3377554, 0.41192317, 1.9433732, 0.01938933, 1.999877],
        [1.0504174, -1.4061394, 0.2314966, 1.9860148, 0.01077211, 1.9999698],
        [-0.7568025, 0.3463564, 0.18459873, 1.982814, 0.00861763, 1.9999628],
    ],
    [
        [0.14112, 0.0100075, 0.1387981, 1.9903207, 0.00646326, 1.9999791],
        [0.08466846, -0.11334133, 0.23099795, 1.9817369, 0.01077207, 1.9999605],
        [1.8185948, -0.8322937, 0.185397, 1.9913884, 0.00861771, 1.9999814],
        [0.14112, 0.0100075, 0.1387981, 1.9903207, 0.00646326, 1.9999791],
        [-0.7568025, 0.3463564, 0.18459873, 1.982814, 0.00861763, 1.9999628],
    ],
]


def test_tutorial_001_fixed_weights_output_is_reproduced():
    ids = torch.as_tensor(
        TextVectorization(max_tokens=10, output_sequence_length=5).adapt(["I am a robot", "you too robot"])(
            ["I am a robot", "you too robot"]
        )
    )
    assert torch.equal(ids, ROBOT_IDS)
    out = FixedPositionEmbedding(sequence_length=5, vocab_size=10, output_dim=6)(ids)
    assert out.shape == (2, 5, 6) and out.dtype == torch.float32
    # the tutorial prints ~8 significant digits of float32 sums below 2 (an ulp there: 2.4e-7) from its own table;
    # ours has the same bits on every machine: 2e-6 covers a few float32 ulps of a differently computed table
    np.testing.assert_allclose(out.numpy(), TUTORIAL_001_FIXED, atol=2e-6)


def test_fixed_module_holds_the_sinusoid_tables_and_nothing_trainable():
    layer = FixedPositionEmbedding(sequence_length=20, vocab_size=200, output_dim=50)
    assert torch.equal(layer.word_embedding.weight, sinusoidal_encoding(200, 50))
    assert torch.equal(layer.position_embedding.weight, sinusoidal_encoding(20, 50))
    assert not any(p.requires_grad for p in layer.parameters())


def test_forward_is_word_row_plus_position_row():
    layer = PositionEmbedding(sequence_length=5, vocab_size=10, output_dim=6, seed=3)
    out = layer(ROBOT_IDS)
    word, pos = layer.word_embedding.weight, layer.position_embedding.weight
    assert torch.equal(out, word[ROBOT_IDS] + pos[None, :5])
    assert torch.equal(out[0, 4], out[1, 4])  # same id at the same position (as in the tutorial's printout)
    assert float(out.detach().abs().max()) <= 0.1  # two U(-0.05, 0.05) draws
    short = layer(ROBOT_IDS[:, :3])  # shorter sequences use positions 0..2
    assert torch.equal(short, out[:, :3])


def test_same_seed_same_tables_different_seed_different_tables():
    a, b, c = (PositionEmbedding(20, 200, 50, seed=s) for s in (1, 1, 2))
    assert torch.equal(a.word_embedding.weight, b.word_embedding.weight)
    assert torch.equal(a.position_embedding.weight, b.position_embedding.weight)
    assert not torch.equal(a.word_embedding.weight, c.word_embedding.weight)
    assert not torch.equal(a.position_embedding.weight, c.position_embedding.weight)
    assert torch.equal(learned_position_table(100, 50, seed=4), learned_position_table(100, 50, seed=4))
    assert not torch.equal(learned_position_table(100, 50, seed=4), learned_position_table(100, 50, seed=5))


def test_module_position_table_is_the_learned_table_and_independent_of_global_rng():
    torch.manual_seed(123)
    layer = PositionEmbedding(20, 200, 50, seed=9, init="normal", scale=0.3)
    torch.manual_seed(456)
    assert torch.equal(layer.position_embedding.weight, learned_position_table(20, 50, 9, "normal", 0.3))


def test_learned_table_values_follow_init_and_do_not_depend_on_dtype():
    uniform = learned_position_table(200, 100, seed=0)
    assert uniform.shape == (200, 100) and uniform.dtype == torch.float32
    assert float(uniform.abs().max()) <= 0.05
    # 20,000 seeded draws (the same on every machine): the bounds are 10, 11 and 5 standard errors of the mean and
    # of the standard deviations; a wrong range or scale is off by far more
    assert abs(float(uniform.mean())) < 0.002 and abs(float(uniform.std()) - 0.05 / math.sqrt(3)) < 0.001
    normal = learned_position_table(200, 100, seed=0, init="normal", scale=2.0)
    assert abs(float(normal.std()) - 2.0) < 0.05
    assert torch.equal(learned_position_table(30, 8, 1, dtype=torch.float64), learned_position_table(30, 8, 1).double())


def test_random_module_is_trainable():
    layer = PositionEmbedding(5, 10, 6, seed=0)
    layer(ROBOT_IDS).sum().backward()
    grad = layer.word_embedding.weight.grad
    used = sorted(set(ROBOT_IDS.flatten().tolist()))
    assert torch.count_nonzero(grad.abs().sum(dim=1)) == len(used)
    assert torch.equal(layer.position_embedding.weight.grad, torch.full((5, 6), 2.0))  # 2 sentences per position


@pytest.mark.parametrize(
    "inputs, word",
    [
        (torch.zeros(2, 5), "integer"),
        (torch.zeros(5, dtype=torch.long), "integer tensor"),
        (torch.full((1, 5), 10), r"\[0, 10\)"),
        (torch.zeros(1, 6, dtype=torch.long), "longer than sequence_length"),
    ],
)
def test_bad_inputs_are_one_clear_error(inputs, word):
    with pytest.raises(PipelineError, match=word):
        PositionEmbedding(5, 10, 6)(inputs)


@pytest.mark.parametrize(
    "kwargs, word",
    [
        ({"seed": -1}, "seed"),
        ({"seed": 1.5}, "seed"),
        ({"init": "xavier"}, "init"),
        ({"scale": 0}, "scale"),
    ],
)
def test_bad_init_settings_are_one_clear_error(kwargs, word):
    with pytest.raises(PipelineError, match=word):
        learned_position_table(10, 4, **{"seed": 0, **kwargs})


# Tutorial 002's printout (d=512): columns 0, 1, 2 and 509, 510, 511 of rows 0..5.
TUTORIAL_002_PE = [
    [0.0, 1.0, 0.0, 1.0, 0.0, 1.0],
    [8.41470985e-01, 5.40302306e-01, 8.21856190e-01, 9.99999994e-01, 1.03663293e-04, 9.99999995e-01],
    [9.09297427e-01, -4.16146837e-01, 9.36414739e-01, 9.99999977e-01, 2.07326584e-04, 9.99999979e-01],
    [1.41120008e-01, -9.89992497e-01, 2.45085415e-01, 9.99999948e-01, 3.10989874e-04, 9.99999952e-01],
    [-7.56802495e-01, -6.53643621e-01, -6.57166863e-01, 9.99999908e-01, 4.14653159e-04, 9.99999914e-01],
    [-9.58924275e-01, 2.83662185e-01, -9.93854779e-01, 9.99999856e-01, 5.18316441e-04, 9.99999866e-01],
]
TUTORIAL_002_RANDOM = [
    [0.71034683, 0.08027048, 0.89859858, 0.48071898, 0.76495253, 0.53869711],
    [0.71247114, 0.33418585, 0.15329225, 0.61768814, 0.32710687, 0.89633072],
    [0.11731439, 0.97467007, 0.66899319, 0.76157481, 0.41975638, 0.90980636],
    [0.42299987, 0.51534082, 0.6459627, 0.58178494, 0.13362482, 0.13826352],
    [0.2734792, 0.80146145, 0.75947837, 0.15180679, 0.93250566, 0.43946461],
    [0.5750698, 0.49106984, 0.56273384, 0.77180581, 0.18834177, 0.6658962],
]
TUTORIAL_002_SUM = [
    [0.71034683, 1.08027048, 0.89859858, 1.48071898, 0.76495253, 1.53869711],
    [1.55394213, 0.87448815, 0.97514844, 1.61768813, 0.32721053, 1.89633072],
    [1.02661182, 0.55852323, 1.60540793, 1.76157479, 0.4199637, 1.90980634],
    [0.56411987, -0.47465167, 0.89104811, 1.58178489, 0.13393581, 1.13826347],
    [-0.4833233, 0.14781783, 0.1023115, 1.15180669, 0.93292031, 1.43946452],
    [-0.38385447, 0.77473203, -0.43112094, 1.77180567, 0.18886009, 1.66589607],
]
SHOWN = [0, 1, 2, 509, 510, 511]


def test_tutorial_002_example_tokens_and_pe_match_its_printout():
    example = random_embedding_with_pe("Transformers revolutionized the field of NLP", embed_dim=512, seed=0)
    assert example["vocab"] == {"Transformers": 0, "revolutionized": 1, "the": 2, "field": 3, "of": 4, "NLP": 5}
    assert example["input_indices"].tolist() == [0, 1, 2, 3, 4, 5]
    assert example["pe"].shape == example["output"].shape == (6, 512)
    np.testing.assert_allclose(example["pe"][:, SHOWN], TUTORIAL_002_PE, atol=6e-9)  # 8 decimals printed: 5e-9
    # The tutorial's own sums minus its random values are our PE (its numbers are printed to 7-8 decimals).
    np.testing.assert_allclose(np.subtract(TUTORIAL_002_SUM, TUTORIAL_002_RANDOM), example["pe"][:, SHOWN], atol=1.1e-7)
    np.testing.assert_array_equal(example["output"], example["input_embeddings"] + example["pe"])


def test_tutorial_002_pe_equals_its_exp_log_formula():
    n, d = 6, 512
    pe = np.zeros((n, d))
    position = np.arange(0, n).reshape(-1, 1)
    div_term = np.exp(np.arange(0, d, 2) * -(np.log(10000.0) / d))
    pe[:, 0::2], pe[:, 1::2] = np.sin(position * div_term), np.cos(position * div_term)
    # numpy's exp, log, sin and cos move by an ulp or two by machine; at positions < 6 that is below 1e-14
    np.testing.assert_allclose(random_embedding_with_pe("a b c d e f", d)["pe"], pe, atol=1e-12)


def test_tutorial_002_random_matrix_is_np_random_seed_then_rand():
    state = np.random.get_state()
    try:
        np.random.seed(11)
        expected = np.random.rand(6, 16)
    finally:
        np.random.set_state(state)
    example = random_embedding_with_pe("Transformers revolutionized the field of NLP", embed_dim=16, seed=11)
    np.testing.assert_array_equal(example["embedding_matrix"], expected)
    other = random_embedding_with_pe("Transformers revolutionized the field of NLP", embed_dim=16, seed=12)
    assert not np.array_equal(other["embedding_matrix"], expected)


def test_tutorial_002_repeated_word_keeps_its_first_index():
    example = random_embedding_with_pe("a b a", embed_dim=8, seed=0)
    assert example["vocab"] == {"a": 0, "b": 1} and example["input_indices"].tolist() == [0, 1, 0]
    assert example["embedding_matrix"].shape == (2, 8)
    np.testing.assert_array_equal(example["input_embeddings"][0], example["input_embeddings"][2])
    assert not np.allclose(example["output"][0], example["output"][2])  # position tells them apart


def test_tutorial_002_bad_input_is_one_clear_error():
    with pytest.raises(PipelineError, match="at least one word"):
        random_embedding_with_pe("   ")
    with pytest.raises(PipelineError, match="embed_dim"):
        random_embedding_with_pe("a b", embed_dim=0)
