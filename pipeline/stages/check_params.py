"""Stage check_params: upstream of every other stage; stops `dvc repro` on an invalid or stale params.yaml.

Without it, an edit to conf/ that was never composed would leave params.yaml unchanged, DVC would
see nothing to do, and the old results would pass for the new config. It also checks the input
files the config names (texts file, GloVe file or zip) and that the MLflow tracking server answers,
so that a bad one stops the run before any computing.
"""

from __future__ import annotations

from pathlib import Path

from pipeline.base.paths import Layout


# `dvc exp run -S` writes params.yaml before any stage runs and leaves it so when a stage fails; every later
# `dvc repro` would then fail the same way, so the message says how to get params.yaml back.
RESTORE_PARAMS = (
    " params.yaml holds these values because `dvc exp run -S` (or `python -m pipeline.compose`) wrote them, and DVC "
    "does not put it back when a stage fails. To get the previous params.yaml back: `python -m pipeline.compose` "
    "(writes it again from conf/; add the overrides you had, if any), or `git checkout params.yaml`."
)


def run(params: dict, layout: Layout, root: Path) -> None:
    from pipeline.base.errors import PipelineError
    from pipeline.base.files import write_json
    from pipeline.base.locks import workspace_holder
    from pipeline.config import check, check_fresh
    from pipeline.config.input_files import check_tracked

    try:
        check(params, root)
    except PipelineError as exc:
        if workspace_holder() is not None:  # inside `python -m pipeline.repro`, which puts params.yaml back itself
            raise
        raise PipelineError(f"{exc}{RESTORE_PARAMS}") from None
    check_fresh(params, root)
    check_tracked(params, root, layout.dvc_yaml)
    if params["tracking"]["enabled"]:
        from pipeline.outputs.tracking import check_reachable

        check_reachable(params["tracking"], root)
    write_json(layout.params_check, {"params_yaml": "fresh and valid"})


if __name__ == "__main__":
    from pipeline.stages._cli import stage_main

    stage_main("check_params", run)
