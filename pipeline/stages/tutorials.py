"""Stage tutorials: the figures of the tutorials beside the notebook (pipeline.figures.tutorials): tutorial 001's
random and fixed position embeddings, tutorial 002's random embedding plus the encoding, tutorial 004's masks of the
configured texts and its encoding plots, reports/figures/tutorials/. It depends on the `tutorials` config and the
tokens (the masks show the configured texts as the tokenizer pads them), not on the encoding or the weights.

Their data (the tutorials' torch layers and masks) is computed in this process, the figures drawn by
pipeline.figures.folders' forked workers from plain arrays.

Reads params: tutorials, the figure settings (registry FIGURE_KEYS, figures.max_sentences: the rows of the padding
mask); files: tokens.json.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from pathlib import Path

from pipeline.base.paths import Layout

if TYPE_CHECKING:
    from pipeline.config.schema import Config


def run(params: Config, layout: Layout, root: Path) -> None:
    """The tutorials' figures (none under figures=summary or none)."""
    from pipeline.figures.folders import draw_stage_figures, torch_threads

    def compute(figures) -> None:
        if figures.kinds:
            with torch_threads(figures):
                figures.queue("tutorials")

    draw_stage_figures("tutorials", params, layout, compute)


if __name__ == "__main__":
    from pipeline.stages._cli import stage_main

    stage_main("tutorials", run)
