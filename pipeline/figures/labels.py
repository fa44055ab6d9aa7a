"""What the figures show, without drawing them: quoted sentences, labels, wrapped titles and the semantic group
colours (which figures a set draws is config: pipeline.config.figure_sets).

Plain Python (no matplotlib, no Hydra): the report stage uses it too, and either import would double its time.
"""

from __future__ import annotations

import textwrap
from typing import Sequence

# Semantic group colours (matplotlib's tab10 without its grey, as hex so that the report needs no matplotlib);
# words outside every group are grey.
GROUP_COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#bcbd22", "#17becf"]
OTHER_COLOUR = "#8c8c8c"


def short_text(words: Sequence[str], width: int = 80) -> str:
    """The tokens a figure shows, quoted, on one line of at most `width` characters (cut at a word, with an ellipsis)."""
    text = " ".join(words)
    if len(text) + 2 > width:
        text = text[: width - 3].rsplit(" ", 1)[0] + " \u2026"
    return f'"{text}"'


def clip_label(word: str, width: int = 14) -> str:
    """A word as a cell or tick label: at most `width` characters."""
    return word if len(word) <= width else word[: width - 1] + "\u2026"


def wrap(text: str, width: int = 70) -> str:
    """Each line of text wrapped at `width` characters (a title that fits its figure)."""
    return "\n".join(part for line in text.splitlines() for part in textwrap.wrap(line, width) or [""])


def group_colours(words: Sequence[str], groups: Sequence[Sequence[str]]) -> tuple[list[str], dict[str, str]]:
    """A colour per word by semantic group (grey outside every group), and the legend's group -> colour: the groups
    with a word among `words` only (a user's sentences, outside metrics.groups' words, get no legend of groups they
    lack); each group keeps its colour whichever others are present."""
    legend, colour_of = {}, {}
    present = set(words)
    for g, group in enumerate(groups):
        colour = GROUP_COLOURS[g % len(GROUP_COLOURS)]
        if present.intersection(group):
            legend["/".join(group)] = colour
        for word in group:
            colour_of.setdefault(word, colour)
    return [colour_of.get(w, OTHER_COLOUR) for w in words], legend
