"""The crossover study: the exact r* (as the sweep finds it: pipeline.core.sweep.exact_switches) of many sentences and GloVe
dimensions, and its distribution; arrays and dicts in, dicts out, no files.

A sentence here is its words' vectors e (n, d) at positions 0..n-1 with the sinusoidal encoding p (n, d); r* is
computed exactly as the sweep computes it (the same k-NN curves on the same ratio grid, the same bisection), and
`sqrt_d_semantic` says whether meaning still wins at the Transformer's scaling r = 1/sqrt(d)
(knn_semantic_hd > knn_positional_hd there).
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from pipeline.core.metrics import RTOL, Reference, crossover, valid_neighbours
from pipeline.core.sinusoid import table as sinusoid_table
from pipeline.core.sweep import exact_switches, wins_at


def sinusoid(n: int, d: int, base: float, layout: str, dtype: str) -> np.ndarray:
    """(n, d) float64: the sinusoidal encoding of positions 0..n-1, rounded once to `dtype` (float32 or float64,
    pipeline.core.choices.DTYPES), in `layout` (interleaved or concatenated): the encoding core's values
    (pipeline.core.encoding.sinusoidal_encoding) bit for bit, at any length (both are pipeline.core.sinusoid's), in
    numpy: the study needs no torch."""
    return sinusoid_table(n, d, base, layout, dtype)


def crossovers(e: np.ndarray, p: np.ndarray, neighbours: int, ratios: np.ndarray, rtol: float = RTOL) -> list[dict]:
    """S sentences of one length n at once: e (S, n, d) their words' vectors, p (S, n, d) or (n, d) their positions'
    encodings, float64. Returns per sentence r_star (None: meaning wins on the whole grid), switches (how many
    switch points the grid brackets) and sqrt_d_semantic (1.0: meaning wins at r = 1/sqrt(d), else 0.0).

    The sweep's own computation (pipeline.core.sweep.wins_at on the grid and exact_switches, as the sweep stage
    runs them for its sentences of one length), so the same bits as the sweep's one sentence at a time.
    """
    e = np.asarray(e, dtype=np.float64)
    count, n, d = e.shape
    if count == 0:
        return []
    p = np.broadcast_to(np.asarray(p, dtype=np.float64), e.shape)
    ref = Reference(e, p, [[]] * count, [], valid_neighbours(neighbours, n))
    rows = np.arange(count)
    on_grid = wins_at(ref, rows, np.tile(ratios, (count, 1)))  # (S, m)
    switches = exact_switches(ratios, on_grid, ref, rtol)
    at_sqrt_d = wins_at(ref, rows, np.full((count, 1), 1 / math.sqrt(d)))[:, 0]
    return [
        {
            "r_star": crossover(ratios, on_grid[s], switches[s]),
            "switches": len(switches[s]),
            "sqrt_d_semantic": float(not at_sqrt_d[s]),
        }
        for s in range(count)
    ]


def crossovers_of(task: tuple) -> list[dict]:
    """crossovers(*task), task = (e, p, neighbours, ratios): one part of the study, as a worker pool's imap passes it
    (a module-level function: the stage's own module runs as __main__, whose functions a pool cannot name)."""
    return crossovers(*task)


def random_sentences(vocabulary: Sequence[str], count: int, lengths: Sequence[int], seed: int) -> dict[int, list]:
    """For each length L, `count` sentences of L distinct words drawn uniformly from `vocabulary` (a list of
    words), reproducibly: the draw for L depends only on (seed, L), so adding a length or a dimension leaves the
    other sentences as they were."""
    out = {}
    for length in lengths:
        rng = np.random.default_rng([seed, length])
        out[length] = [
            [vocabulary[i] for i in rng.choice(len(vocabulary), size=length, replace=False)] for _ in range(count)
        ]
    return out


def study_vocabulary(words: Sequence[str], size: int) -> list[str]:
    """The first `size` purely alphabetic words of a GloVe vocabulary (GloVe lists words by frequency): common
    words, no punctuation or numbers."""
    out = []
    for word in words:
        if word.isalpha() and word.isascii():
            out.append(word)
            if len(out) == size:
                break
    return out


def distribution(r_star: Sequence[float | None], sqrt_d_semantic: Sequence[float], switches: Sequence[int]) -> dict:
    """Summary of a set of sentences: count; median, quartiles, min and max of r* over the sentences whose
    curves cross on the grid (log-symmetric data: quantiles of r itself); beyond_grid, how many never cross;
    multiple_switches, how many switch more than once; sqrt_d_semantic_share, the share where meaning still
    wins at r = 1/sqrt(d)."""
    found = np.array([r for r in r_star if r is not None], dtype=np.float64)
    quartiles = np.quantile(found, [0.0, 0.25, 0.5, 0.75, 1.0]).tolist() if len(found) else [None] * 5
    return {
        "sentences": len(r_star),
        "median": quartiles[2],
        "q1": quartiles[1],
        "q3": quartiles[3],
        "min": quartiles[0],
        "max": quartiles[4],
        "beyond_grid": len(r_star) - len(found),
        "multiple_switches": int(sum(s > 1 for s in switches)),
        "sqrt_d_semantic_share": float(np.mean(sqrt_d_semantic)) if len(sqrt_d_semantic) else None,
    }


def summarize(rows: list[dict]) -> dict:
    """rows: one per (d, sentence) with d, length, from_file, r_star, switches, sqrt_d_semantic. Returns per d
    (key "d{d}") the distribution of the random sentences overall and by length ("L{length}"), and the texts
    file's sentences."""
    out: dict = {}
    for d in sorted({row["d"] for row in rows}):
        mine = [row for row in rows if row["d"] == d]
        random_rows = [row for row in mine if not row["from_file"]]

        def dist(selected: list[dict]) -> dict:
            return distribution(
                [r["r_star"] for r in selected],
                [r["sqrt_d_semantic"] for r in selected],
                [r["switches"] for r in selected],
            )

        out[f"d{d}"] = {
            "sqrt_d_ratio": 1 / math.sqrt(d),
            "random": dist(random_rows),
            "by_length": {
                f"L{length}": dist([r for r in random_rows if r["length"] == length])
                for length in sorted({r["length"] for r in random_rows})
            },
            "file": dist([row for row in mine if row["from_file"]]),
        }
    return out
