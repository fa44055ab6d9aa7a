"""What the figures are, without drawing them: which kinds each figure set draws, which sentences get figures of
their own, quoted sentences, labels, wrapped titles and the semantic group colours.

Plain Python (no matplotlib, no Hydra): the report stage uses it too, and either import would double its time.
"""

from __future__ import annotations

import textwrap
from typing import Sequence

# The figure sets (figures=all|summary|none, i.e. figures.name): figure kind -> the sets that draw it; `none` draws
# nothing. `all` draws every kind (the default run). `summary` is what a sweep point needs: what changes with the
# weights, per sentence, and not the encoding, projection or tutorial figures, which a sweep of the weights does not
# change (or repeats once per pair). pipeline.config.schema restates the names as the choices of figures.name.
FIGURE_SETS: dict[str, tuple[str, ...]] = {
    "encoding": ("all",),  # pe_heatmap, pe_dot_product, pe_distance, pe_norms, pe_offset_distance
    "projection": ("all",),  # projection_s{i}_{pair}: the notebook's figures, one per weight pair
    "panels": ("all", "summary"),  # panels_s{i}: every weight pair on one shared PCA basis
    "ratio_sweep": ("all", "summary"),  # ratio_sweep_s{i}: the metrics against r, r* and the pairs marked
    "crossover": ("all", "summary"),  # crossover_all_sentences: r* of every sentence (more than max_sentences)
    "tutorials": ("all",),  # tutorial*: the tutorials' examples
    "relative": ("all",),  # rope_relative_scores, rope_decay, alibi_bias, alibi_penalty
}

# The sets whose ratio_sweep figures mark the configured weight pairs. figures=summary marks only the Transformer's
# scaling: its figure is then the same at every point of a sweep over the weights (each point's pairs are in its
# panels and metrics), so that a sweep draws it once (pipeline.outputs.figure_cache), not at every point.
PAIRS_MARKED: tuple[str, ...] = ("all",)


def drawn_kinds(figure_set: str) -> set[str]:
    """The figure kinds the set `figure_set` (figures.name) draws."""
    return {kind for kind, sets in FIGURE_SETS.items() if figure_set in sets}


# Semantic group colours (matplotlib's tab10 without its grey, as hex so that the report needs no matplotlib);
# words outside every group are grey.
GROUP_COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#bcbd22", "#17becf"]
OTHER_COLOUR = "#8c8c8c"


def shown_sentences(count: int, max_sentences: int) -> int:
    """How many sentences get figures and report sections of their own: the first figures.max_sentences."""
    return min(count, max_sentences)


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
    """A colour per word by semantic group (grey outside every group), and the legend's group -> colour."""
    legend, colour_of = {}, {}
    for g, group in enumerate(groups):
        colour = GROUP_COLOURS[g % len(GROUP_COLOURS)]
        legend["/".join(group)] = colour
        for word in group:
            colour_of.setdefault(word, colour)
    return [colour_of.get(w, OTHER_COLOUR) for w in words], legend
