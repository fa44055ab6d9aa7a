"""Stage check_params: upstream of every other stage; stops `dvc repro` on an invalid or stale params.yaml.

Without it, an edit to conf/ that was never composed would leave params.yaml unchanged, DVC would
see nothing to do, and the old results would pass for the new config. It also checks the input
files the config names (texts file, GloVe file or zip) and that the MLflow tracking server answers,
so that a bad one stops the run before any computing.
"""

from __future__ import annotations

from pathlib import Path

from pipeline.base.paths import Layout


def run(params: dict, layout: Layout, root: Path) -> None:
    from pipeline.base.files import write_json
    from pipeline.config import check, check_fresh
    from pipeline.config.input_files import check_tracked
    from pipeline.registry import input_file_keys

    check(params, root)
    check_fresh(params, root)
    check_tracked(params, root, layout.dvc_yaml, input_file_keys())
    if params["tracking"]["enabled"]:
        from pipeline.outputs.tracking import check_reachable

        check_reachable(params["tracking"], root)
    write_json(layout.params_check, {"params_yaml": "fresh and valid"})


if __name__ == "__main__":
    from pipeline.stages._cli import stage_main

    stage_main("check_params", run)
