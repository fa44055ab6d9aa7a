"""Stage tokenize: texts -> word index, sequences, padded ids and padding mask (data/tokens/tokens.json)."""

from __future__ import annotations

from typing import TYPE_CHECKING
import logging
from pathlib import Path

from pipeline.base.paths import Layout

if TYPE_CHECKING:
    from pipeline.config.schema import Config

log = logging.getLogger("pipeline")


def run(params: Config, layout: Layout, root: Path) -> dict:
    from pipeline.base.files import write_json
    from pipeline.inputs.texts import load_texts
    from pipeline.inputs.tokens import tokenize

    tokens = tokenize(load_texts(params.texts, root), params.tokenizer)
    write_json(layout.tokens, tokens)
    log.info(
        "tokenize: %d sentences, %d distinct words, padded to %d",
        len(tokens["texts"]),
        len(tokens["word_index"]),
        len(tokens["padded"][0]),
    )
    return tokens


if __name__ == "__main__":
    from pipeline.stages._cli import stage_main

    stage_main("tokenize", run)
