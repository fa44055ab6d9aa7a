"""Tests for pipeline.inputs.tokenizer against known tf.keras outputs."""

import numpy as np
import pytest

from pipeline.inputs.tokenizer import (
    Tokenizer,
    pad_sequences,
    pad_sequences_with_mask,
    text_to_word_sequence,
)

SEED_TEXTS = [
    "king queen man woman dog wolf football basketball red green yellow",
    "man queen yellow basketball green dog woman football king red wolf",
]


# ----------------------------------------------------------- seed notebook
def test_seed_notebook_word_index_and_sequences():
    tok = Tokenizer(num_words=64)
    tok.fit_on_texts(SEED_TEXTS)
    assert tok.word_index == {
        "king": 1,
        "queen": 2,
        "man": 3,
        "woman": 4,
        "dog": 5,
        "wolf": 6,
        "football": 7,
        "basketball": 8,
        "red": 9,
        "green": 10,
        "yellow": 11,
    }
    seqs = tok.texts_to_sequences(SEED_TEXTS)
    assert seqs == [list(range(1, 12)), [3, 2, 11, 8, 10, 5, 4, 7, 1, 9, 6]]
    assert tok.word_counts["king"] == 2
    assert tok.index_word[11] == "yellow"


def test_seed_notebook_padding():
    tok = Tokenizer(num_words=64)
    tok.fit_on_texts(SEED_TEXTS)
    padded = pad_sequences(tok.texts_to_sequences(SEED_TEXTS), padding="post", maxlen=100)
    assert padded.shape == (2, 100)
    assert padded.dtype == np.int32
    np.testing.assert_array_equal(padded[0], list(range(1, 12)) + [0] * 89)
    np.testing.assert_array_equal(padded[1, :11], [3, 2, 11, 8, 10, 5, 4, 7, 1, 9, 6])
    assert not padded[1, 11:].any()


# ------------------------------------------------- known tf tutorial outputs
def test_tf_tutorial_word_index():
    tok = Tokenizer(num_words=100)
    tok.fit_on_texts(["I love my dog", "I love my cat", "You love my dog!"])
    assert tok.word_index == {"love": 1, "my": 2, "i": 3, "dog": 4, "cat": 5, "you": 6}


def test_tf_tutorial_oov_sequences_and_padding():
    sentences = [
        "I love my dog",
        "I love my cat",
        "You love my dog!",
        "Do you think my dog is amazing?",
    ]
    tok = Tokenizer(num_words=100, oov_token="<OOV>")
    tok.fit_on_texts(sentences)
    assert tok.word_index == {
        "<OOV>": 1,
        "my": 2,
        "love": 3,
        "dog": 4,
        "i": 5,
        "you": 6,
        "cat": 7,
        "do": 8,
        "think": 9,
        "is": 10,
        "amazing": 11,
    }
    seqs = tok.texts_to_sequences(sentences)
    assert seqs == [[5, 3, 2, 4], [5, 3, 2, 7], [6, 3, 2, 4], [8, 6, 9, 2, 4, 10, 11]]
    test_seqs = tok.texts_to_sequences(["i really love my dog", "my dog loves my manatee"])
    assert test_seqs == [[5, 1, 3, 2, 4], [2, 4, 1, 2, 1]]
    padded = pad_sequences(seqs, maxlen=5)
    np.testing.assert_array_equal(padded, [[0, 5, 3, 2, 4], [0, 5, 3, 2, 7], [0, 6, 3, 2, 4], [9, 2, 4, 10, 11]])


# ------------------------------------------------------- tokenizer semantics
def test_count_order_ties_in_first_occurrence_order():
    tok = Tokenizer()
    tok.fit_on_texts(["b a b c a d"])
    assert tok.word_index == {"b": 1, "a": 2, "c": 3, "d": 4}
    assert list(tok.word_counts.items()) == [("b", 2), ("a", 2), ("c", 1), ("d", 1)]


def test_ties_across_documents_and_refit_accumulates():
    tok = Tokenizer()
    tok.fit_on_texts(["x y"])
    tok.fit_on_texts(["z y z"])
    # counts: x1 y2 z2 ; insertion x, y, z
    assert tok.word_index == {"y": 1, "z": 2, "x": 3}


def test_lowercase_and_filters():
    tok = Tokenizer()
    tok.fit_on_texts(["Hello, World! hello"])
    assert tok.word_index == {"hello": 1, "world": 2}
    assert tok.texts_to_sequences(["WORLD...hello?"]) == [[2, 1]]


def test_lower_false_keeps_case():
    tok = Tokenizer(lower=False)
    tok.fit_on_texts(["Hello hello Hello"])
    assert tok.word_index == {"Hello": 1, "hello": 2}


def test_text_to_word_sequence_matches_keras():
    assert text_to_word_sequence("Hi!  there.\tYou\nall") == ["hi", "there", "you", "all"]
    # apostrophe is not in the default filters
    assert text_to_word_sequence("don't stop") == ["don't", "stop"]
    assert text_to_word_sequence("a-b", filters="") == ["a-b"]


def test_custom_split():
    tok = Tokenizer(split="|")
    tok.fit_on_texts(["a b|c||a b"])
    # filters become "|", spaces are kept inside words
    assert tok.word_index == {"a b": 1, "c": 2}
    assert tok.texts_to_sequences(["c|a b|zzz"]) == [[2, 1]]


def test_list_of_tokens_input():
    tok = Tokenizer()
    tok.fit_on_texts([["Foo", "bar"], ["foo"]])
    assert tok.word_index == {"foo": 1, "bar": 2}
    assert tok.texts_to_sequences([["bar", "FOO", "baz"]]) == [[2, 1]]


def test_num_words_truncates_sequences_but_word_index_keeps_all():
    tok = Tokenizer(num_words=3)
    tok.fit_on_texts(["a a a b b c d"])
    assert tok.word_index == {"a": 1, "b": 2, "c": 3, "d": 4}
    # only indices < num_words survive
    assert tok.texts_to_sequences(["d c b a"]) == [[2, 1]]


def test_unknown_words_dropped_without_oov():
    tok = Tokenizer()
    tok.fit_on_texts(["a b"])
    assert tok.texts_to_sequences(["a zzz b", "zzz"]) == [[1, 2], []]


def test_oov_token_index_and_mapping():
    tok = Tokenizer(num_words=3, oov_token="<unk>")
    tok.fit_on_texts(["a a a b b c"])
    assert tok.word_index == {"<unk>": 1, "a": 2, "b": 3, "c": 4}
    # a -> 2 ; b (3 >= num_words) -> oov ; unknown -> oov
    assert tok.texts_to_sequences(["a b c zzz"]) == [[2, 1, 1, 1]]


def test_oov_token_also_in_text_keras_quirk():
    # Keras builds word_index with dict(zip(...)): a duplicate oov token in the
    # corpus overwrites index 1 with its later position.
    tok = Tokenizer(oov_token="unk", filters="")
    tok.fit_on_texts(["a a unk"])
    assert tok.word_index == {"unk": 3, "a": 2}
    assert tok.texts_to_sequences(["zzz"]) == [[3]]


# ------------------------------------------------------------- tokenizer errors
@pytest.mark.parametrize(
    "kwargs, needle",
    [
        ({"num_words": 0}, "num_words"),
        ({"num_words": -5}, "num_words"),
        ({"num_words": 2.5}, "num_words"),
        ({"num_words": True}, "num_words"),
        ({"split": ""}, "split"),
        ({"split": None}, "split"),
        ({"filters": 3}, "filters"),
        ({"oov_token": 7}, "oov_token"),
        ({"lower": "yes"}, "lower"),
    ],
)
def test_invalid_constructor_args(kwargs, needle):
    with pytest.raises(ValueError, match=needle):
        Tokenizer(**kwargs)


def test_invalid_texts():
    tok = Tokenizer()
    with pytest.raises(ValueError, match="wrap it in a list"):
        tok.fit_on_texts("a single string")
    with pytest.raises(ValueError, match=r"texts\[1\]"):
        tok.fit_on_texts(["ok", 42])
    with pytest.raises(ValueError, match="iterable"):
        tok.fit_on_texts(5)
    # failed fit leaves no partial state
    assert tok.word_counts == {} and tok.word_index == {}


def test_texts_to_sequences_before_fit():
    with pytest.raises(ValueError, match="fit_on_texts"):
        Tokenizer().texts_to_sequences(["a"])


# ------------------------------------------------------------- pad_sequences
SEQ = [[1], [2, 3], [4, 5, 6]]


def test_pad_keras_doc_examples():
    np.testing.assert_array_equal(pad_sequences(SEQ), [[0, 0, 1], [0, 2, 3], [4, 5, 6]])
    np.testing.assert_array_equal(pad_sequences(SEQ, value=-1), [[-1, -1, 1], [-1, 2, 3], [4, 5, 6]])
    np.testing.assert_array_equal(pad_sequences(SEQ, padding="post"), [[1, 0, 0], [2, 3, 0], [4, 5, 6]])
    np.testing.assert_array_equal(pad_sequences(SEQ, maxlen=2), [[0, 1], [2, 3], [5, 6]])
    assert pad_sequences(SEQ).dtype == np.int32


@pytest.mark.parametrize(
    "padding, truncating, expected",
    [
        ("pre", "pre", [[0, 0, 1, 2], [3, 4, 5, 6]]),
        ("pre", "post", [[0, 0, 1, 2], [1, 2, 3, 4]]),
        ("post", "pre", [[1, 2, 0, 0], [3, 4, 5, 6]]),
        ("post", "post", [[1, 2, 0, 0], [1, 2, 3, 4]]),
    ],
)
def test_pad_truncate_combinations(padding, truncating, expected):
    seqs = [[1, 2], [1, 2, 3, 4, 5, 6]]
    out = pad_sequences(seqs, maxlen=4, padding=padding, truncating=truncating)
    np.testing.assert_array_equal(out, expected)


def test_pad_dtype_value_and_empty():
    out = pad_sequences([[], [1.5, 2.5]], dtype="float32", value=-0.5)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, [[-0.5, -0.5], [1.5, 2.5]])
    assert pad_sequences([[], []]).shape == (2, 0)
    assert pad_sequences([]).shape == (0, 0)
    assert pad_sequences([[], [7]], maxlen=3).tolist() == [[0, 0, 0], [0, 0, 7]]


def test_pad_numpy_inputs_and_sample_shape():
    seqs = [np.array([[1, 1], [2, 2]]), np.array([[3, 3]])]
    out = pad_sequences(seqs, padding="post")
    assert out.shape == (2, 2, 2)
    np.testing.assert_array_equal(out[1], [[3, 3], [0, 0]])
    with pytest.raises(ValueError, match="Shape of sample"):
        pad_sequences([[[1, 2]], [[1, 2, 3]]])


def test_pad_string_value():
    out = pad_sequences([["a"], ["b", "c"]], dtype=object, value="<pad>")
    assert out.tolist() == [["<pad>", "a"], ["b", "c"]]


@pytest.mark.parametrize(
    "kwargs, needle",
    [
        ({"padding": "middle"}, "padding"),
        ({"truncating": "both"}, "truncating"),
        ({"maxlen": 0}, "maxlen"),
        ({"maxlen": -1}, "maxlen"),
        ({"maxlen": 2.0}, "maxlen"),
    ],
)
def test_pad_invalid_args(kwargs, needle):
    with pytest.raises(ValueError, match=needle):
        pad_sequences(SEQ, **kwargs)


def test_pad_invalid_sequences():
    with pytest.raises(ValueError, match="sequences"):
        pad_sequences(5)
    with pytest.raises(ValueError, match=r"sequences\[1\]"):
        pad_sequences([[1], 2])


# ------------------------------------------------------------------- masks
@pytest.mark.parametrize("padding", ["pre", "post"])
def test_pad_with_mask_when_value_collides_with_token(padding):
    seqs = [[0, 5], [5, 0, 0, 7, 8], []]
    padded, mask, truncated = pad_sequences_with_mask(seqs, maxlen=4, padding=padding, truncating="post", value=0)
    np.testing.assert_array_equal(padded, pad_sequences(seqs, maxlen=4, padding=padding, truncating="post"))
    if padding == "post":
        expected = [[1, 1, 0, 0], [1, 1, 1, 1], [0, 0, 0, 0]]
    else:
        expected = [[0, 0, 1, 1], [1, 1, 1, 1], [0, 0, 0, 0]]
    np.testing.assert_array_equal(mask, np.array(expected, dtype=bool))
    assert mask.dtype == bool
    assert truncated == [False, True, False]
    # the naive value-based mask (padded != 0) is wrong here, the length-based one is right
    assert not np.array_equal(padded != 0, mask)
    # number of real tokens equals min(len, maxlen)
    assert mask.sum(axis=1).tolist() == [2, 4, 0]


def test_pad_with_mask_defaults_maxlen_none():
    padded, mask, truncated = pad_sequences_with_mask(SEQ)
    assert padded.shape == mask.shape == (3, 3)
    np.testing.assert_array_equal(mask, padded != 0)
    assert truncated == [False, False, False]
    with pytest.raises(ValueError, match="padding"):
        pad_sequences_with_mask(SEQ, padding="left")
