"""What every stage entry point does around its work: load params.yaml, report user errors in one line."""
from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Callable

from pipeline.errors import PipelineError

log = logging.getLogger("pipeline")


def setup_logging() -> None:
    if not log.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(levelname)s: %(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)
        log.propagate = False


def stage_main(name: str, run: Callable[[dict, "Layout", Path], None]) -> None:
    """Run `run(params, layout, root)` for the checkout in the cwd; exit 2 with one message on a user error."""
    from pipeline.config import load
    from pipeline.paths import Layout, checkout_root

    setup_logging()
    try:
        root = checkout_root()
        params = load(root)
        if params["tracking"]["enabled"]:
            from pipeline.tracking import check_reachable

            check_reachable(params["tracking"], root)  # a dead server fails now, not after the computing
        run(params, Layout(root), root)
    except PipelineError as exc:
        print(f"error in stage {name}: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
