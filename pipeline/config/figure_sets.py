"""The figure sets, `figures.name`: which figure kinds each set draws, and which sentences get figures of their own.

Declared once here (config: the choices of figures.name derive from it); the figures stage draws by it and the
limits count by it. Plain Python, no imports: the schema and the limits read it at compose time.
"""

from __future__ import annotations

# The figure sets (figures=all|summary|none, i.e. figures.name): figure kind -> the sets that draw it; `none` draws
# nothing. `all` draws every kind (the default run). `summary` is what a sweep point needs: what changes with the
# weights, per sentence, and not the encoding, projection or tutorial figures, which a sweep of the weights does not
# change (or repeats once per pair). The choices of figures.name (pipeline.config.schema) derive from them.
FIGURE_SETS: dict[str, tuple[str, ...]] = {
    "encoding": ("all",),  # pe_heatmap, pe_dot_product, pe_distance, pe_norms, pe_offset_distance
    "projection": ("all",),  # projection_s{i}_{pair}: the notebook's figures, one per weight pair
    "panels": ("all", "summary"),  # panels_s{i}: every weight pair on one shared PCA basis
    "ratio_sweep": ("all", "summary"),  # ratio_sweep_s{i}: the metrics against r, r* and the pairs marked
    "crossover": ("all", "summary"),  # crossover_all_sentences: r* of every sentence (more than max_sentences)
    "tutorials": ("all",),  # tutorial*: the tutorials' examples
    "relative": ("all",),  # rope_relative_scores, rope_decay, alibi_bias, alibi_penalty
    # pe_properties (families x properties), rope_scalings (decay, expectation, wavelengths), minilm_probing
    "properties": ("all",),
}

# The sets whose ratio_sweep figures mark the configured weight pairs. figures=summary marks only the Transformer's
# scaling: its figure is then the same at every point of a sweep over the weights (each point's pairs are in its
# panels and metrics), so that a sweep draws it once (pipeline.figures.cache), not at every point.
PAIRS_MARKED: tuple[str, ...] = ("all",)


def drawn_kinds(figure_set: str) -> set[str]:
    """The figure kinds the set `figure_set` (figures.name) draws."""
    return {kind for kind, sets in FIGURE_SETS.items() if figure_set in sets}


# every set, `none` (draws nothing) included: the choices of figures.name
FIGURE_SET_NAMES: tuple[str, ...] = (*dict.fromkeys(s for sets in FIGURE_SETS.values() for s in sets), "none")


def shown_sentences(count: int, max_sentences: int) -> int:
    """How many sentences get figures and report sections of their own: the first figures.max_sentences."""
    return min(count, max_sentences)
