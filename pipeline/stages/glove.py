"""Stage glove: the configured GloVe source -> data/glove/ (the project's binary store)."""

from __future__ import annotations

import logging
from pathlib import Path

from pipeline.base.paths import Layout, download_cache

log = logging.getLogger("pipeline")


def run(params: dict, layout: Layout, root: Path) -> dict:
    from pipeline.config.schema import typed_group
    from pipeline.inputs.glove_sources import acquire

    cfg = typed_group("glove", params["glove"])
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
    from pipeline.stages._cli import stage_main

    stage_main("glove", run)
