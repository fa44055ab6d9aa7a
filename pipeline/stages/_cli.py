"""What every stage entry point does around its work: read params.yaml, report user errors in one line.

params.yaml reaches a stage as the schema's dataclasses (`pipeline.config.schema.Config`, built by `validate`).
Under `python -m pipeline.repro` that is all: it composed params.yaml from conf/, checked it and wrote dvc.yaml just before `dvc repro`. Under a plain `dvc repro` or `dvc exp run`, which compose nothing or only
params.yaml, each stage first makes the same checks (`check_params`: a stale params.yaml, input files, limits, its
own input files listed in dvc.yaml), so that none computes from a config that pipeline.repro would have refused,
whatever order DVC runs the stages in. A user error, a full disk or an unwritable folder exits 2 with one
message on stderr, or in $PE_ERROR_FILE when that is set, so that `python -m pipeline.repro` prints it once, after
DVC's own report. Bugs keep their traceback.

A stage writes the workspace, so it runs under the workspace lock (pipeline.base.locks): inside the lock of the
`python -m pipeline.repro` that started it, or its own when a plain `dvc repro` / `dvc exp run` runs it. Inside a
holder's run it also stops when that run is gone (killed with -9: its stages must not go on writing the workspace
that the next run puts back).
"""

from __future__ import annotations

import gc
import logging
import os
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from pipeline.base.errors import PipelineError, environment_error
from pipeline.base.paths import Layout

if TYPE_CHECKING:
    from pipeline.config.schema import Composition, Config

log = logging.getLogger("pipeline")
ERROR_FILE_ENV = "PE_ERROR_FILE"
WATCH_INTERVAL_S = 0.2


def restore_hint(composition: Composition) -> str:
    """What a stage's error adds outside `pipeline.repro` (which puts params.yaml back itself): `dvc exp run -S` writes
    params.yaml before any stage runs and leaves it so when a stage fails, and every later plain `dvc repro` then
    fails on the same values."""
    return f" {composition.label} keeps these values: `{composition.compose}` resets it to conf/."


def setup_logging() -> None:
    if not log.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(levelname)s: %(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)
        log.propagate = False


def _report(message: str) -> None:
    if os.environ.get(ERROR_FILE_ENV):  # pipeline.repro prints it once, after DVC's own report
        Path(os.environ[ERROR_FILE_ENV]).write_text(message + "\n", encoding="utf-8")
    else:
        print(message, file=sys.stderr)


def _stop_with(holder: int) -> None:
    """Watch the run that started this stage; when it is gone, end this stage and the processes it started."""
    import signal

    from pipeline.base.processes import running

    def watch() -> None:
        while running(holder):
            time.sleep(WATCH_INTERVAL_S)
        # the holder started dvc repro in a process group of its own: dvc, its shell, this stage and its workers
        os.killpg(os.getpgrp(), signal.SIGKILL)

    threading.Thread(target=watch, name="holder-watch", daemon=True).start()


def _print_help(name: str, run: Callable) -> None:
    """What `python -m pipeline.stages.<name> --help` prints instead of running: the stage's docstring and how to
    run it."""
    doc = (sys.modules[run.__module__].__doc__ or "").strip()
    print(f"`python -m pipeline.stages.{name}` (no arguments; DVC runs it from dvc.yaml): {doc}")
    print(
        "It reads params.yaml and writes this stage's outputs of dvc.yaml. To run the pipeline: `python -m pipeline.repro`."
    )


class _ParamsError(PipelineError):
    """params.yaml itself is refused (invalid, stale, a file it names): outside pipeline.repro the message says how to
    get the previous params.yaml back."""


def check_params(
    raw: dict, root: Path, layout: Layout, input_files: tuple[str, ...], composition: Composition | None = None
) -> Config:
    """params.yaml (`raw`) as a Config, with the checks pipeline.repro makes when it composes: not stale against conf/
    (by content: the sources' SHA-256 it records, else a composition), the files it names and the limits, and the
    stage's own input files (`input_files`, config keys: the registry's) listed as deps in dvc.yaml. Under `dvc exp
    run`, which composes params.yaml without recording how, its composition is recorded first. For another
    composition (the length experiment's params file): its schema, not stale; its stage checks the rest."""
    from pipeline.config import check_fresh, check_runnable
    from pipeline.inputs.input_files import check_tracked
    from pipeline.config.params import record_composition
    from pipeline.config.schema import MAIN, validate

    composition = composition or MAIN
    cfg = validate(raw, composition.schema)
    if os.environ.get("DVC_EXP_NAME"):  # `dvc exp run` composed the params file just now, without a stamp
        record_composition(root, composition)
    check_fresh(raw, root, composition)
    if composition is MAIN:
        check_runnable(cfg, root)
        check_tracked(raw, root, layout.dvc_yaml, input_files)
    return cfg


def _stage_config(layout: Layout, root: Path, composition, composed: bool, input_files: tuple[str, ...], check):
    """The stage's params file validated as its schema's Config: as is when pipeline.repro composed and checked it
    (`composed`), else checked first (check_params with the stage's input files; a failure is a _ParamsError), then
    `check(cfg, root)`."""
    from pipeline.config.params_file import read_params_file
    from pipeline.config.schema import validate

    raw = read_params_file(getattr(layout, composition.params), composition)
    if composed:
        return validate(raw)
    try:
        cfg = check_params(raw, root, layout, input_files, composition)
    except PipelineError as exc:
        raise _ParamsError(str(exc)) from None
    if check is not None:
        check(cfg, root)
    return cfg


def stage_main(
    name: str,
    run: Callable[[Config, Layout, Path], object],
    *,
    input_files: tuple[str, ...] = (),
    check: Callable[[Config, Path], None] | None = None,
    composition: Composition | None = None,
) -> None:
    """Run `run(cfg, layout, root)` for the checkout in the cwd (cfg: params.yaml validated, as a Config); exit 2
    with one message on a user error. Outside pipeline.repro, params.yaml is checked first (`check_params`, with the
    stage's `input_files`), then `check(cfg, root)`, what else this stage checks before a plain `dvc repro` computes.
    composition: the stage's when it is not the pipeline's (the length experiment: its params file, its schema, the
    lock of its own DVC project)."""
    from contextlib import nullcontext

    from pipeline.base.files import clean_stale_temporaries
    from pipeline.base.locks import workspace_holder, workspace_lock
    from pipeline.base.paths import checkout_root, download_cache
    from pipeline.config.schema import MAIN

    if any(a in ("-h", "--help") for a in sys.argv[1:]):
        _print_help(name, run)
        raise SystemExit(0)
    setup_logging()
    composition = composition or MAIN
    try:
        root = checkout_root()
        layout = Layout(root)
        holder = workspace_holder() if composition is MAIN else None
        if holder is not None:
            _stop_with(holder)
        workspace = root if composition is MAIN else getattr(layout, composition.params).parent
        with workspace_lock(workspace, f"dvc repro (stage {name})") if holder is None else nullcontext():
            work_dirs = layout.work_dirs if composition is MAIN else (workspace,)
            clean_stale_temporaries([*work_dirs, download_cache(root)])  # a killed run's, if any
            cfg = _stage_config(layout, root, composition, holder is not None, input_files, check)
            run(cfg, layout, root)
        # Done: the process exits without Python's final garbage collection over the heap the stage built (mlflow,
        # torch, the GloVe vocabulary), which objects gc.freeze() moved out of its reach (the standard library's own
        # API; the OS frees the memory), for speed (docs/benchmarks-measurements.md#process-start-and-exit); the same
        # bytes are written: every output is closed before this line.
        gc.freeze()
    except PipelineError as exc:
        hint = workspace_holder() is None and (isinstance(exc, _ParamsError) or os.environ.get("DVC_EXP_NAME"))
        hint = hint and "python -m pipeline.compose" not in str(exc)  # a stale params.yaml's message says it
        _report(f"error in stage {name}: {exc}{restore_hint(composition) if hint else ''}")
        raise SystemExit(2) from None
    except OSError as exc:
        message = environment_error(exc)
        if message is None:
            raise
        _report(f"error in stage {name}: {message}")
        raise SystemExit(2) from None
    except KeyboardInterrupt:
        print(f"stage {name}: interrupted", file=sys.stderr)
        raise SystemExit(130) from None
