"""The W1/W2 weight pairs of the sweep: parsing, broadcasting, labels."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

SQRT_D = "sqrt_d"
BASELINE = (1.0, 0.0)  # pure word embeddings: the reference every projection is compared to


@dataclass(frozen=True)
class WeightPair:
    """One term W1 * word_embedding + W2 * positional_encoding."""

    w1: float
    w2: float
    w1_text: str  # as configured: "1", "10", "sqrt_d"
    w2_text: str

    @property
    def label(self) -> str:
        """Metric-safe name, e.g. 'w1_1-w2_10', 'w1_sqrt_d-w2_1', 'w1_0p5-w2_1'."""
        return f"w1_{_slug(self.w1_text)}-w2_{_slug(self.w2_text)}"

    @property
    def title(self) -> str:
        """Human name, e.g. 'W1=1, W2=10' or 'W1=sqrt(d)=7.07, W2=1'."""
        return f"W1={_pretty(self.w1_text, self.w1)}, W2={_pretty(self.w2_text, self.w2)}"

    @property
    def is_baseline(self) -> bool:
        return (self.w1, self.w2) == BASELINE


def _slug(text: str) -> str:
    return text.replace(".", "p").replace("-", "m").replace("+", "")


def _pretty(text: str, value: float) -> str:
    return f"sqrt(d)={value:.3g}" if text == SQRT_D else text


def _number_text(value: float) -> str:
    """Short form ('10', '0.5', '1e-05') when it reads back as the same number, else the exact repr:
    two different weights must never share a text, hence a label (a metric key)."""
    short = f"{value:g}"
    return short if float(short) == value else repr(value)


def _parse(value: Any, d_model: int) -> tuple[float, str]:
    if isinstance(value, str) and value.strip() == SQRT_D:
        return math.sqrt(d_model), SQRT_D
    value = float(value) + 0.0  # -0.0 -> 0.0: one weight, one label
    return value, _number_text(value)


def _as_list(value: Any) -> list:
    return list(value) if isinstance(value, (list, tuple)) else [value]


def weight_pairs(w1: Any, w2: Any, d_model: int) -> list[WeightPair]:
    """Pairs from sweep.w1 and sweep.w2 (scalars broadcast against lists), baseline (1, 0) first.

    w1, w2: a weight (a number or 'sqrt_d') or a list of weights, as pipeline.config's schema validates them
    (lists of equal length, or one of a single weight).
    Duplicates (the same configured weights, i.e. the same label) are dropped, keeping first occurrence;
    'sqrt_d' stays its own pair even where sqrt(d_model) equals another configured number.
    """
    w1s, w2s = _as_list(w1), _as_list(w2)
    n = max(len(w1s), len(w2s))
    w1s, w2s = (w1s * n if len(w1s) == 1 else w1s), (w2s * n if len(w2s) == 1 else w2s)
    pairs = [WeightPair(*BASELINE, "1", "0")]
    seen = {pairs[0].label}  # a set: thousands of pairs are checked in linear time
    for a, b in zip(w1s, w2s, strict=True):
        (v1, t1), (v2, t2) = _parse(a, d_model), _parse(b, d_model)
        pair = WeightPair(v1, v2, t1, t2)
        if pair.label not in seen:
            seen.add(pair.label)
            pairs.append(pair)
    return pairs
