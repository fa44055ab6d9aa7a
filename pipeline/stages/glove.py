"""Stage glove: the configured GloVe source -> data/glove/ (the project's binary store)."""

from __future__ import annotations

from typing import TYPE_CHECKING
import logging
from pathlib import Path

from pipeline.base.paths import Layout, download_cache

if TYPE_CHECKING:
    from pipeline.config.schema import Config

log = logging.getLogger("pipeline")


def run(params: Config, layout: Layout, root: Path) -> dict:
    from pipeline.inputs.glove_sources import acquire

    cfg = params.glove
    manifest = acquire(cfg, layout.glove_dir, root, cache_dir=download_cache(root))
    origin = manifest["origin"]
    where = origin.get("url") or origin.get("path") or getattr(cfg, cfg.source)  # the mirror used, the file read
    log.info(
        "glove: %s rows x %s dims from %s %s%s -> %s",
        manifest["rows"],
        manifest["dim"],
        origin["source"],
        where,
        f" ({origin['member']})" if origin.get("member") else "",
        layout.glove_dir,
    )
    return manifest


if __name__ == "__main__":
    from pipeline.stages.registry import BY_NAME
    from pipeline.stages._cli import stage_main

    stage_main("glove", run, input_files=BY_NAME["glove"].input_files)
