"""The synthetic tasks (Delétang et al. 2023, used by Ruoss et al. 2023), generated in-process from a seeded
torch.Generator.

A string x of n symbols drawn uniformly from 0 .. vocab-1 is followed by the separator SEP = vocab and the answer y:

    copy     y = x                 ("duplicate string")
    reverse  y = x reversed        ("reverse string")

The model reads the sequence s = [x, SEP, y] shifted by one (inputs s[:-1], targets s[1:], both (batch, 2n)) and is
scored on the targets of its last n positions: the answer, each symbol predicted from the true symbols before it
(teacher forcing). A sequence of length n occupies positions 0 .. 2n - 1.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from pipeline.base.errors import PipelineError
from pipeline.core.choices import LENGTH_TASKS as TASKS


class Batch(NamedTuple):
    inputs: torch.Tensor  # (batch, 2n) int64: x, SEP, y without its last symbol
    targets: torch.Tensor  # (batch, 2n) int64: the inputs shifted by one
    answer: int  # the first scored position, n: targets[:, n:] is the answer y


def check_task(task: str) -> str:
    if task not in TASKS:
        raise PipelineError(f"task {task!r} is not one of {', '.join(TASKS)}: choose one, e.g. length.tasks=[copy].")
    return task


def positions(n: int) -> int:
    """The positions a sequence of length n occupies: 2n (the inputs of x, SEP, y)."""
    return 2 * n


def vocabulary(symbols: int) -> int:
    """Token ids the model embeds: the symbols and SEP."""
    return symbols + 1


def chance(symbols: int) -> float:
    """The per-token accuracy of guessing a uniform symbol: 1 / symbols."""
    return 1.0 / symbols


def make_batch(task: str, n: int, batch: int, symbols: int, generator: torch.Generator) -> Batch:
    """`batch` sequences of length n of `task` (symbols drawn from `generator`, on the CPU)."""
    check_task(task)
    if n < 1 or batch < 1 or symbols < 2:
        raise PipelineError(f"a batch needs n >= 1, batch >= 1 and symbols >= 2 (got n={n}, {batch}, {symbols})")
    x = torch.randint(0, symbols, (batch, n), generator=generator)
    y = x if task == "copy" else x.flip(1)
    sequence = torch.cat([x, torch.full((batch, 1), symbols), y], dim=1)  # (batch, 2n + 1)
    return Batch(sequence[:, :-1], sequence[:, 1:], n)
