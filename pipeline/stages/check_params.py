"""Stage check_params: runs whenever conf/ or params.yaml changes, and stops `dvc repro` on a stale params.yaml.

Without it, an edit to conf/ that was never composed would leave params.yaml unchanged, DVC would
see nothing to do, and the old results would pass for the new config.
"""
from __future__ import annotations

from pathlib import Path

from pipeline.paths import Layout

MARKER = Path("data") / "params_check.json"


def run(params: dict, layout: Layout, root: Path) -> None:
    from pipeline.files import write_json

    # stage_main has already loaded params.yaml with the freshness check and validated it.
    write_json(layout.base / MARKER, {"params_yaml": "fresh and valid"})


if __name__ == "__main__":
    from pipeline.stages._cli import stage_main

    stage_main("check_params", run)
