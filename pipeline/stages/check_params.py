"""Stage check_params: upstream of every other stage; stops `dvc repro` on an invalid or stale params.yaml.

Without it, an edit to conf/ that was never composed would leave params.yaml unchanged, DVC would
see nothing to do, and the old results would pass for the new config. It also checks the input
files the config names (texts file, GloVe file or zip) and that the MLflow tracking server answers,
so that a bad one stops the run before any computing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from pathlib import Path

from pipeline.base.paths import Layout

if TYPE_CHECKING:
    from pipeline.config.schema import Config


def run(params: Config, layout: Layout, root: Path) -> None:

    from pipeline.base.files import write_json
    from pipeline.base.params_file import read_params_file
    from pipeline.config import check_fresh, check_runnable
    from pipeline.config.input_files import check_tracked
    from pipeline.registry import input_file_keys

    # params: params.yaml, validated by stage_main; freshness and dvc.yaml's deps are about the file itself
    check_runnable(params, root)
    written = read_params_file(layout.params)
    check_fresh(written, root)
    check_tracked(written, root, layout.dvc_yaml, input_file_keys())
    if params.tracking.enabled:
        from pipeline.outputs.tracking import check_reachable

        check_reachable(params.tracking.uri, root)
    write_json(layout.params_check, {"params_yaml": "fresh and valid"})


if __name__ == "__main__":
    from pipeline.stages._cli import stage_main

    stage_main("check_params", run)
