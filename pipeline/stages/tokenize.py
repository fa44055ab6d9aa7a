"""Stage tokenize: texts -> word index, sequences, padded ids and padding mask (data/tokens/tokens.json).

Under a plain `dvc repro` it is also the pipeline's gate (pipeline/stages/registry.py): conf/ is one of its deps, so that an
edit of conf/ that params.yaml does not have yet stops the run here (every stage checks that params.yaml is fresh,
pipeline.stages._cli), and it checks that the MLflow store answers before anything is computed (`check_tracking`).
Under `python -m pipeline.repro` both were checked before `dvc repro` started.
"""

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
    from pipeline.base.words import counted
    from pipeline.inputs.tokens import tokenize

    tokens = tokenize(load_texts(params.texts, root), params.tokenizer)
    write_json(layout.tokens, tokens)
    log.info(
        "tokenize: %s, %s, padded to %d",
        counted(len(tokens["texts"]), "sentence"),
        counted(len(tokens["word_index"]), "distinct word"),
        len(tokens["padded"][0]),
    )
    return tokens


def check_tracking(params: Config, root: Path) -> None:
    """A dead MLflow server, or a damaged store, is reported now, by the first stage of a plain `dvc repro`, not after
    the computing (the figures stage logs the run last)."""
    if params.tracking.enabled:
        from pipeline.outputs.tracking import check_reachable

        check_reachable(params.tracking.uri, root)


if __name__ == "__main__":
    from pipeline.stages.registry import BY_NAME
    from pipeline.stages._cli import stage_main

    stage_main("tokenize", run, input_files=BY_NAME["tokenize"].input_files, check=check_tracking)
