"""Limits before exhaustion: what a config would cost, estimated simply and declared once, refused at compose /
check time (before anything is allocated) when it exceeds the machine.

Each estimate names its formula and the knob that lowers it:

    encode   max_len x d x 12 bytes        the float32 table and its float64 angles   encoding.max_len
    sweep    (P + 1 + m) x n^2 x 8 x 3     one batched PCA per sentence: P pairs, the  sweep.w1 / sweep.w2,
                                           Transformer's pair and m ratios, each an   sweep.ratios.points,
                                           n x n Gram matrix (eigh works on copies)   tokenizer.maxlen
    figures  min(S, max_sentences) x (P + 2) per-sentence figures (a projection per   figures.max_sentences,
                                           pair, the panels, the ratio sweep)         sweep.w1 / sweep.w2

n: the longest sentence in words (as the tokenizer splits it, cut at tokenizer.maxlen); S: sentences; P: weight
pairs (the longer of the two lists). Memory estimates are refused above MEMORY_SHARE of the machine's physical
memory, the figure count above MAX_FIGURES (about half a second each).
"""

from __future__ import annotations

import os
from typing import Sequence

from pipeline.base.errors import PipelineError

MEMORY_SHARE = 0.8
MAX_FIGURES = 2000
GB = 1e9


def machine_memory() -> int:
    """Physical memory of this machine in bytes (POSIX); 0 when unknown (then memory is not checked)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return 0


def _count(weights) -> int:
    return len(weights) if isinstance(weights, list) else 1


def longest_sentence(params: dict, sentences: Sequence[str]) -> int:
    """n: the most words of one sentence as the tokenizer splits it, at most tokenizer.maxlen."""
    from pipeline.inputs.tokenizer import text_to_word_sequence

    tok = params["tokenizer"]
    n = max((len(text_to_word_sequence(s, tok["filters"], tok["lower"], tok["split"])) for s in sentences), default=0)
    return min(n, tok["maxlen"]) if tok["maxlen"] else n


def estimates(params: dict, sentences: Sequence[str]) -> list[tuple[str, float, str, str]]:
    """(what, bytes, formula with the numbers, knobs) for each memory estimate of the module docstring."""
    enc, sweep = params["encoding"], params["sweep"]
    d = enc["d_model"] or params["glove"]["dim"]
    pairs = max(_count(sweep["w1"]), _count(sweep["w2"]))
    m, n = sweep["ratios"]["points"], longest_sentence(params, sentences)
    batch = pairs + 1 + m
    return [
        (
            "the positional encoding",
            enc["max_len"] * d * 12,
            f"encoding.max_len x d x 12 bytes = {enc['max_len']:,} x {d} x 12",
            "lower encoding.max_len",
        ),
        (
            "the sweep's batched PCA",
            batch * n * n * 8 * 3,
            f"(pairs + 1 + ratios) x n^2 x 24 bytes = {batch:,} x {n:,}^2 x 24 (n: words of the longest sentence)",
            "use fewer weight pairs (sweep.w1 / sweep.w2) or sweep.ratios.points, or shorter sentences "
            "(tokenizer.maxlen cuts them)",
        ),
    ]


def check_limits(params: dict, sentences: Sequence[str], memory: int | None = None) -> None:
    """Refuse a config whose memory estimate exceeds MEMORY_SHARE of `memory` (default: this machine's) or that
    would draw more than MAX_FIGURES per-sentence figures. Raises PipelineError naming the estimate and the knob."""
    memory = machine_memory() if memory is None else memory
    for what, needed, formula, knob in estimates(params, sentences):
        if memory and needed > MEMORY_SHARE * memory:
            raise PipelineError(
                f"this config needs about {needed / GB:,.1f} GB of memory for {what} ({formula}), "
                f"more than {MEMORY_SHARE:.0%} of this machine's {memory / GB:,.1f} GB: it would fail "
                f"or swap. Fix: {knob}."
            )
    shown = min(len(sentences), params["figures"]["max_sentences"])
    pairs = max(_count(params["sweep"]["w1"]), _count(params["sweep"]["w2"])) + 1
    figures = shown * (pairs + 2)
    if figures > MAX_FIGURES:
        raise PipelineError(
            f"this config would draw about {figures:,} figures ({shown} sentences x ({pairs:,} weight "
            f"pairs + 2)), more than {MAX_FIGURES:,} (about half a second each). Fix: lower "
            "figures.max_sentences, or use fewer weight pairs (sweep.w1 / sweep.w2); the ratio grid "
            "(sweep.ratios) covers many ratios without a figure each."
        )
