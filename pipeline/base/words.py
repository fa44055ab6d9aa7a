"""Counts in messages: "1 sentence", "2 sentences"."""

from __future__ import annotations


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """`n` and `noun`, plural unless n is 1: counted(1, "sentence") == "1 sentence"; counted(2, "ratio") ==
    "2 ratios"; `plural` for a noun that does not take an "s" (counted(2, "match", "matches"))."""
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"
