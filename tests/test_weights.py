"""pipeline.core.weights: parsing, broadcasting, de-duplication and labels of the W1/W2 sweep.
(Which weights the config may hold is the schema's: tests/test_config.py.)"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from pipeline.core.weights import weight_pairs

# MLflow metric keys allow alphanumerics, '_', '-', '.', ' ', '/'; a label must also split unambiguously
LABEL = re.compile(r"^w1_([A-Za-z0-9_.]+)-w2_([A-Za-z0-9_.]+)$")


def values(pairs):
    return [(p.w1, p.w2) for p in pairs]


def labels(pairs):
    return [p.label for p in pairs]


def test_seed_sweep():
    """The notebook's sweep at d=100: baseline first, then the four pairs in order, sqrt_d = 10."""
    pairs = weight_pairs([1, 1, 10, "sqrt_d"], [1, 10, 1, 1], d_model=100)
    assert labels(pairs) == ["w1_1-w2_0", "w1_1-w2_1", "w1_1-w2_10", "w1_10-w2_1", "w1_sqrt_d-w2_1"]
    assert values(pairs) == [(1.0, 0.0), (1.0, 1.0), (1.0, 10.0), (10.0, 1.0), (10.0, 1.0)]
    assert [p.is_baseline for p in pairs] == [True, False, False, False, False]
    assert [(p.w1_text, p.w2_text) for p in pairs][-1] == ("sqrt_d", "1")
    assert "sqrt(d)" in pairs[-1].title and "sqrt(d)" not in pairs[3].title
    assert pairs[1].title == "W1=1, W2=1"


def test_sqrt_d_follows_d_model():
    """sqrt_d resolves to sqrt(d_model) (7.07... for GloVe 50d) and the title shows it."""
    (_, pair) = weight_pairs("sqrt_d", 1, d_model=50)
    assert pair.w1 == math.sqrt(50)
    assert pair.title == "W1=sqrt(d)=7.07, W2=1"
    (_, pair) = weight_pairs(1, "sqrt_d", d_model=300)
    assert pair.w2 == math.sqrt(300) and pair.label == "w1_1-w2_sqrt_d"


def test_scalar_broadcasts_against_list():
    """A scalar w2 pairs with every w1 (and vice versa); int and float spellings give the same label."""
    pairs = weight_pairs([1, 2.0, 3], 10, d_model=50)
    assert values(pairs) == [(1.0, 0.0), (1.0, 10.0), (2.0, 10.0), (3.0, 10.0)]
    assert labels(pairs)[1:] == ["w1_1-w2_10", "w1_2-w2_10", "w1_3-w2_10"]
    assert values(weight_pairs(10, [1, 2], d_model=50))[1:] == [(10.0, 1.0), (10.0, 2.0)]
    assert values(weight_pairs([4], [1, 2], d_model=50))[1:] == [(4.0, 1.0), (4.0, 2.0)]


def test_scalar_and_scalar():
    """Two scalars make one pair after the baseline."""
    assert labels(weight_pairs(2, 3, d_model=50)) == ["w1_1-w2_0", "w1_2-w2_3"]


def test_duplicates_dropped_keeping_first():
    """Repeated pairs (also 10 vs 10.0) and a user pair equal to the baseline appear once, in first-seen order."""
    pairs = weight_pairs([1, 1, 10, 1.0, 10.0, 1, 2], [0, 1, 1, 1, 1.0, 0.0, 5], d_model=50)
    assert labels(pairs) == ["w1_1-w2_0", "w1_1-w2_1", "w1_10-w2_1", "w1_2-w2_5"]
    assert labels(weight_pairs(1, 0, d_model=50)) == ["w1_1-w2_0"]
    assert labels(weight_pairs(1, -0.0, d_model=50)) == ["w1_1-w2_0"]
    assert labels(weight_pairs([2, 2], [0, -0.0], d_model=50)) == ["w1_1-w2_0", "w1_2-w2_0"]


def test_ten_thousand_pairs_with_repeats_keep_each_label_once_in_order():
    """A 10,000-pair sweep (checked in linear time) with every pair given twice, and the baseline among them."""
    w2 = [float(x) for x in np.logspace(-2, 2, 10_000)]
    pairs = weight_pairs(1, w2 + w2 + [0.0], d_model=50)
    assert len(pairs) == 10_001 and pairs[0].is_baseline
    assert [p.w2 for p in pairs[1:]] == w2 and len(set(labels(pairs))) == 10_001


def test_close_but_different_weights_get_distinct_labels():
    """Weights that differ beyond 6 significant digits stay apart: no two pairs share a label (a metric key)."""
    pairs = weight_pairs([1, 1.0000001, 0.1234567, 0.1234568], 1, d_model=50)
    assert len(pairs) == 5
    assert len(set(labels(pairs))) == len(pairs)
    assert values(pairs)[1:] == [(1.0, 1.0), (1.0000001, 1.0), (0.1234567, 1.0), (0.1234568, 1.0)]


def test_labels_for_fractions():
    """0.5 is spelled 0p5 in labels and 0.5 in titles."""
    (_, pair) = weight_pairs(0.5, 1, d_model=50)
    assert pair.label == "w1_0p5-w2_1"
    assert pair.title == "W1=0.5, W2=1"


@pytest.mark.parametrize("w1,w2", [(-1, 1), (1, -2.5), (-0.5, -10), (1e-5, 1), (1, 1e20), (-3e-7, 2), (123456789, 1)])
def test_labels_are_metric_safe(w1, w2):
    """Negative, tiny and huge weights give labels of [A-Za-z0-9_.] parts joined by a single '-'."""
    (_, pair) = weight_pairs(w1, w2, d_model=50)
    assert pair.w1 == float(w1) and pair.w2 == float(w2)
    assert LABEL.match(pair.label), pair.label
    assert pair.label.count("-") == 1


def test_negative_and_positive_labels_differ():
    """-1 and 1 must not collapse into one label."""
    pairs = weight_pairs([1, -1], [2, 2], d_model=50)
    assert len(pairs) == 3 and len(set(labels(pairs))) == 3
    assert "-" not in pairs[2].label.split("-w2_")[0]


def test_lists_of_different_lengths_are_a_bug_not_a_silent_truncation():
    """The config's weights are validated by the schema (tests/test_config.py); called directly with lists that
    cannot pair up, weight_pairs raises rather than dropping weights."""
    with pytest.raises(ValueError):
        weight_pairs([1, 2, 3], [1, 2], d_model=50)


def test_tuple_and_padded_sqrt_d_accepted():
    """A tuple works like a list and ' sqrt_d ' like 'sqrt_d'."""
    pairs = weight_pairs((1, " sqrt_d "), (2, 2), d_model=16)
    assert values(pairs)[1:] == [(1.0, 2.0), (4.0, 2.0)]
    assert pairs[2].label == "w1_sqrt_d-w2_2"
