"""What every stage entry point does around its work: read params.yaml, report user errors in one line.

Stages trust params.yaml: the check_params stage, upstream of every other, has validated it (and
checked it is fresh) before any of them runs. A user error exits 2 with one message on stderr,
or in $PE_ERROR_FILE when that is set, so that `python -m pipeline.repro` prints it once, after
DVC's own report. Bugs keep their traceback.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import Callable

from pipeline.base.errors import PipelineError
from pipeline.base.paths import Layout

log = logging.getLogger("pipeline")
ERROR_FILE_ENV = "PE_ERROR_FILE"


def setup_logging() -> None:
    if not log.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(levelname)s: %(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)
        log.propagate = False


def stage_main(name: str, run: Callable[[dict, Layout, Path], object]) -> None:
    """Run `run(params, layout, root)` for the checkout in the cwd; exit 2 with one message on a user error."""
    from pipeline.base.files import clean_stale_temporaries
    from pipeline.base.params_file import read_params_file
    from pipeline.base.paths import checkout_root, download_cache

    setup_logging()
    try:
        root = checkout_root()
        layout = Layout(root)
        clean_stale_temporaries([*layout.work_dirs, download_cache(root)])  # a killed run's, if any
        run(read_params_file(layout.params), layout, root)
    except PipelineError as exc:
        message = f"error in stage {name}: {exc}"
        if os.environ.get(ERROR_FILE_ENV):  # pipeline.repro prints it once, after DVC's own report
            Path(os.environ[ERROR_FILE_ENV]).write_text(message + "\n", encoding="utf-8")
        else:
            print(message, file=sys.stderr)
        raise SystemExit(2) from None
