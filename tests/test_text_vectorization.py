"""TextVectorization: Keras's vocabulary order (ties included), max_tokens, standardization, padding."""

from __future__ import annotations

import random
import string

import numpy as np
import pytest

from pipeline.base.errors import PipelineError
from pipeline.tutorials.text_vectorization import TextVectorization, split_whitespace, standardize


def vocab(texts, **kwargs) -> list[str]:
    return TextVectorization(**kwargs).adapt(texts).get_vocabulary()


def keras_order(counts: dict[str, int]) -> list[str]:
    """The expression in keras IndexLookup.finalize_state, on the arrays TF hands it (bytes objects)."""
    tokens = np.array([t.encode("utf-8") for t in counts], dtype=object)
    values = np.array(list(counts.values()))
    return [tokens[i].decode("utf-8") for i in np.lexsort((tokens, values))[::-1]]


def test_tutorial_001_robot_example():
    layer = TextVectorization(max_tokens=10, output_sequence_length=5)
    layer.adapt(["I am a robot", "you too robot"])
    assert layer.get_vocabulary() == ["", "[UNK]", "robot", "you", "too", "i", "am", "a"]
    ids = layer(["I am a robot", "you too robot"])
    assert ids.dtype == np.int64
    assert ids.tolist() == [[5, 6, 7, 2, 0], [3, 4, 2, 0, 0]]


@pytest.mark.parametrize(
    "texts, expected",
    [
        (["b a c"], ["c", "b", "a"]),  # all tied: descending, not first-occurrence order
        (["x y x z y w"], ["y", "x", "z", "w"]),  # ties inside each count
        (["a ab"], ["ab", "a"]),  # a prefix sorts before its extensions
        (["9 10 100"], ["9", "100", "10"]),  # bytes, not numbers
        (["zèbre zebra zebre"], ["zèbre", "zebre", "zebra"]),  # UTF-8 bytes: è (C3 A8) > any ASCII letter
        (["a a", "b b", "c"], ["b", "a", "c"]),  # counts add up over texts
    ],
)
def test_ties_are_broken_by_descending_token(texts, expected):
    assert vocab(texts)[2:] == expected


def test_case_kept_without_lower_sorts_upper_case_last():
    assert vocab(["Zeta alpha Beta"], standardize=None)[2:] == ["alpha", "Zeta", "Beta"]


def test_order_matches_keras_lexsort_expression_on_random_corpora():
    rng = random.Random(7)
    alphabet = ["a", "b", "ab", "ba", "é", "z", "Z", "10", "9", "ß", "aa"]
    for _ in range(200):
        words = [rng.choice(alphabet) for _ in range(rng.randint(1, 25))]
        layer = TextVectorization(standardize=None).adapt([" ".join(words)])
        assert layer.get_vocabulary()[2:] == keras_order(layer.token_counts)


def test_max_tokens_counts_both_reserved_entries_and_cuts_inside_a_tie():
    layer = TextVectorization(max_tokens=4).adapt(["a b c d"])
    assert layer.get_vocabulary() == ["", "[UNK]", "d", "c"]
    assert layer(["a b c d"]).tolist() == [[1, 1, 3, 2]]
    assert vocab(["a b a"], max_tokens=2) == ["", "[UNK]"]
    assert vocab(["a b a"], max_tokens=100) == ["", "[UNK]", "a", "b"]  # never padded up to max_tokens


def test_punctuation_set_is_exactly_keras_default_strip_regex():
    removed = {c for c in string.printable if standardize(c, "strip_punctuation") == ""}
    assert removed == set("!\"#$%&()*+,-./:;<=>?@[\\]^_`{|}~'")  # the regex's ',-\.' range holds '-'


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Hello, World! don't stop-gap.", ["hello", "world", "dont", "stopgap"]),  # deleted, not split
        ("[UNK] (x)", ["unk", "x"]),
        ("Élan ÉCOLE İstanbul", ["Élan", "École", "İstanbul"]),  # tf.strings.lower touches ASCII letters only
        ("it’s — «fine» ¿ok?", ["it’s", "—", "«fine»", "¿ok"]),  # non-ASCII punctuation stays
        ("a\u00a0b c", ["a\u00a0b", "c"]),  # no-break space is not ASCII whitespace
        ("  a\tb\nc\r\nd\x0be\x0cf  ", ["a", "b", "c", "d", "e", "f"]),
        ("", []),
        (" ... ", []),
    ],
)
def test_lower_and_strip_punctuation_then_whitespace_split(text, expected):
    assert TextVectorization().tokenize(text) == expected


def test_other_standardize_modes():
    assert standardize("Don't STOP", None) == "Don't STOP"
    assert standardize("Don't STOP", "lower") == "don't stop"
    assert standardize("Don't STOP", "strip_punctuation") == "Dont STOP"
    assert split_whitespace("\t x  y \n") == ["x", "y"]


def test_output_sequence_length_pads_and_truncates_at_the_end():
    layer = TextVectorization(output_sequence_length=3).adapt(["a b c d e", "a"])
    vocabulary = layer.get_vocabulary()
    ids = layer(["a b c d e", "a", "", "zzz a"])
    assert ids.shape == (4, 3)
    assert [vocabulary[i] for i in ids[0]] == ["a", "b", "c"]  # keeps the first 3
    assert ids[1].tolist() == [vocabulary.index("a"), 0, 0]
    assert ids[2].tolist() == [0, 0, 0]
    assert ids[3].tolist() == [1, vocabulary.index("a"), 0]  # unknown word -> [UNK] = 1


def test_no_output_sequence_length_pads_to_the_longest_text_of_the_call():
    layer = TextVectorization().adapt(["a b c", "a"])
    assert layer(["a", "a b"]).shape == (2, 2)
    assert layer(["a b c", "b"]).tolist() == [[2, 4, 3], [4, 0, 0]]
    assert layer.sequences(["c a x"]) == [[3, 2, 1]]


def test_adapt_replaces_the_vocabulary():
    layer = TextVectorization().adapt(["a a b"])
    layer.adapt(["c"])
    assert layer.get_vocabulary() == ["", "[UNK]", "c"]


@pytest.mark.parametrize(
    "kwargs, word",
    [
        ({"max_tokens": 1}, "max_tokens"),
        ({"max_tokens": 2.5}, "max_tokens"),
        ({"standardize": "lower_and_strip_accents"}, "standardize"),
        ({"split": "character"}, "split"),
        ({"output_sequence_length": 0}, "output_sequence_length"),
    ],
)
def test_bad_arguments_are_one_clear_error(kwargs, word):
    with pytest.raises(PipelineError, match=word):
        TextVectorization(**kwargs)


def test_misuse_is_one_clear_error():
    with pytest.raises(PipelineError, match="adapt"):
        TextVectorization()(["a"])
    with pytest.raises(PipelineError, match="list"):
        TextVectorization().adapt("I am a robot")
    with pytest.raises(PipelineError, match="text 1"):
        TextVectorization().adapt(["a", 3])
