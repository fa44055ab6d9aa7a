"""`python -m pipeline.repro [overrides] [-- dvc repro options]`: compose params.yaml from conf/, then `dvc repro`.

The README's main command. Only stages whose inputs changed re-run. It is all or nothing: the
config and the input files it names are checked before anything is written, and if a stage fails
later (e.g. every word of a sentence is missing from GloVe, which only the encode stage can know),
params.yaml, dvc.yaml, dvc.lock and every stage output (data/, reports/) are put back exactly as they were.
A user error exits 2 with one message naming the cause and the fix; a bug keeps its traceback.
Temporaries a killed run left beside the outputs (.pe-tmp.<host>.<pid>.*, git-ignored) are removed first, and so are
a DVC cache object or a recorded output whose bytes are not what their hash says (pipeline.base.integrity: each is
named, and DVC checks the recorded output out again or recomputes it). A run that is put back leaves no new object in
the DVC cache.

Examples:
    python -m pipeline.repro
    python -m pipeline.repro sweep.w2=10 texts=queen_king
    python -m pipeline.repro glove=6B-100d -- --force      # options after `--` go to `dvc repro`
    python -m pipeline.repro --restore                      # finish putting back a run that could not be

One run at a time writes the workspace: a second one fails at once, naming the run that holds it. Ctrl-C, SIGTERM
or SIGHUP stop dvc repro and its stages, put the workspace back and exit 130, 143 or 129 with one line. The files
as they were are saved in .dvc/tmp/repro-journal/ until the run ends; if putting them back fails (a full disk, a
read-only folder), they stay there, the message says so, and `--restore` or the next run finishes it.

The overrides are those of `python -m pipeline.compose` (group=option, key=value); the groups and options:
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import tempfile
from pathlib import Path


def guarded_paths(root: Path) -> list[Path]:
    """What a run may change: params.yaml, dvc.yaml (its input-file deps follow the config), dvc.lock, DVC's lock of
    the outputs in use (.dvc/tmp/rwlock) and every output the stage registry declares.

    DVC writes dvc.lock and its rwlock in place, so a kill can cut them short ("validation failed", "JSON structure
    is corrupted"), or leave in the rwlock the pid of a dead run that another process has since taken ("is busy");
    the rollback of a stopped run puts both back as they were, with no knowledge of their format."""
    from pipeline.base.paths import Layout
    from pipeline.stages.registry import STAGES

    layout = Layout(root)
    outputs = [
        getattr(layout, name)
        for stage in STAGES
        for name in [out.layout for out in stage.outputs] + list(stage.untracked)
    ]
    return [layout.params, layout.dvc_yaml, layout.dvc_lock, root / ".dvc" / "tmp" / "rwlock", *outputs]


JOURNAL = Path(".dvc") / "tmp" / "repro-journal"
NOTHING_CHANGED = "nothing was changed: params.yaml, dvc.yaml, dvc.lock, data/ and reports/ are as they were"


# The dvc child: it imports what every `dvc repro` imports first (about half of a no-op `dvc repro`:
# docs/benchmarks-measurements.md#process-start-and-exit) while this process composes params.yaml on the other core,
# then runs `dvc repro` once
# it reads "go" (anything else: it exits, having done nothing). DVC's own CLI entry point, dvc.cli.main; its hint to
# turn on auto staging left out (runs leave every file unstaged: docs/pipeline.md#set-up-in-detail).
_DVC_CHILD = (
    "import gc, logging, sys\n"
    "import dvc.cli, dvc.cli.parser, dvc.commands.repro, dvc.repo, dvc.repo.reproduce, dvc.repo.scm_context, networkx\n"
    "from pipeline.repro import MachineErrors\n"
    "logging.getLogger('dvc').addHandler(MachineErrors())\n"
    "dvc.repo.scm_context.logger.addFilter(lambda record: 'core.autostage' not in record.getMessage())\n"
    "status = dvc.cli.main(['repro', *sys.argv[1:]]) if sys.stdin.readline() == 'go\\n' else 1\n"
    "gc.freeze()\n"  # no final collection of DVC's heap (pipeline.stages._cli.stage_main says why)
    "sys.exit(status)\n"
)


class MachineErrors(logging.Handler):
    """In the dvc child: an error DVC logs that the machine caused (a full disk, a read-only folder: an OSError in
    its chain of causes), written as one message naming the path and the fix to the error file of
    pipeline.stages._cli, unless a stage wrote one first; pipeline.repro prints it and exits 2, as for a stage."""

    def emit(self, record: logging.LogRecord) -> None:
        from pipeline.base.errors import environment_error
        from pipeline.stages._cli import ERROR_FILE_ENV

        exc, seen, message = record.exc_info[1] if record.exc_info else None, set(), None
        while exc is not None and id(exc) not in seen and message is None:
            seen.add(id(exc))
            if isinstance(exc, OSError) and exc.filename is None and exc.errno is not None:
                # DVC's copy into its cache names no file here (its own lines above do): the project it writes in
                exc = OSError(exc.errno, exc.strerror, f"{os.getcwd()}, where DVC writes the outputs and its cache")
            message = environment_error(exc)
            exc = exc.__cause__ or exc.__context__
        target = os.environ.get(ERROR_FILE_ENV)
        if message and target and not os.path.exists(target):
            try:
                Path(target).write_text(f"error: {message}\n", encoding="utf-8")
            except OSError:  # its folder is full too: DVC's own line stands
                pass


def _start_dvc(args: list[str], root: Path, env: dict) -> subprocess.Popen:
    """`dvc repro ARGS`, started now (its imports) and waiting for `_run_dvc`, in a process group of its own, so that
    a stop signal reaches this process only (one clean message, no traceback of each stage): on one, the whole group
    (dvc, its stages, their workers) is killed (`_end_dvc`); and (Linux) a SIGKILL when this process dies, even by
    kill -9 (its stages watch this process themselves: pipeline.stages._cli)."""
    from pipeline.base.processes import dying_with_parent

    die_with_parent = dying_with_parent()
    return subprocess.Popen(
        [sys.executable, "-c", _DVC_CHILD, *args],
        cwd=root,
        env=env,
        stdin=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: (os.setpgid(0, 0), die_with_parent()),
    )


def _run_dvc(dvc: subprocess.Popen) -> int:
    """Let the started dvc child run `dvc repro` (params.yaml and dvc.yaml are written); its exit status."""
    try:
        dvc.stdin.write("go\n")
        dvc.stdin.close()
    except BrokenPipeError:  # it has exited already (e.g. DVC cannot be imported): its status says so
        pass
    return dvc.wait()


def _end_dvc(dvc: subprocess.Popen) -> None:
    """Kill the dvc child's process group unless it has exited (a failed compose, a stop signal, an error here)."""
    import signal

    if dvc.poll() is None:
        try:
            os.killpg(dvc.pid, signal.SIGKILL)
        except ProcessLookupError:  # stopped before the child made its group
            dvc.kill()
    dvc.wait()
    dvc.stdin.close()  # nothing written to it here: closing cannot fail


def _restore_failed(root: Path, exc: OSError) -> str:
    from pipeline.base.errors import environment_error

    return (
        f"error: putting the workspace back failed: {environment_error(exc) or exc}. Nothing is lost: the files as "
        f"they were before the run are saved in {root / JOURNAL}. Once that is fixed, finish putting them back with "
        "`python -m pipeline.repro --restore` (the next run does it first)."
    )


def _finish_stopped_run(journal, root: Path) -> None:
    """Put back what a run stopped by kill -9 (or a failed rollback) left half done, before anything else."""
    import time

    record = journal.pending()
    ended = _rollback(journal, [], root)
    if record is not None:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(record["started"]))
        print(
            f"repro: the run started at {when} (pid {record['pid']}: `{record.get('command', '?')}`) did not finish: "
            f"put the workspace back as it was before it{ended}",
            file=sys.stderr,
        )


def main(argv: list[str] | None = None) -> int:
    import signal

    from pipeline.base.errors import PipelineError, environment_error
    from pipeline.base.locks import workspace_lock
    from pipeline.base.paths import checkout_root
    from pipeline.base.snapshot import Journal
    from pipeline.base.stops import Interrupted, on_stop_signals, raise_interrupted

    argv = sys.argv[1:] if argv is None else argv
    overrides, dvc_args = (argv[: argv.index("--")], argv[argv.index("--") + 1 :]) if "--" in argv else (argv, [])
    root = checkout_root()
    if any(a in ("-h", "--help") for a in overrides):
        from pipeline.compose import groups_help

        print(__doc__)
        print(groups_help(root))
        return 0
    restore_only = overrides == ["--restore"]
    journal = Journal(root / JOURNAL)
    command = " ".join(["python -m pipeline.repro", *argv])
    on_stop_signals(raise_interrupted)
    try:
        with workspace_lock(root, command):
            on_stop_signals(signal.SIG_IGN)  # quick renames: let them finish
            _finish_stopped_run(journal, root)  # a failure: _RestoreFailed
            on_stop_signals(raise_interrupted)
            if restore_only:
                print("repro: the workspace is as the last finished run left it")
                return 0
            return _transaction(journal, root, command, overrides, dvc_args)
    except Interrupted as stop:
        ended = "".join(getattr(stop, "__notes__", ()))  # the MLflow run of a run put back (_rollback)
        print(
            f"interrupted by {stop.name}: stopped dvc repro and its stages; {NOTHING_CHANGED}{ended}", file=sys.stderr
        )
        return stop.status
    except _RestoreFailed as failed:
        print(_restore_failed(root, failed.cause), file=sys.stderr)
        return 1
    except PipelineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        message = environment_error(exc)
        if message is None:
            raise
        print(f"error: {message}. Nothing was changed.", file=sys.stderr)
        return 2
    finally:
        on_stop_signals(signal.SIG_DFL)


class _RestoreFailed(Exception):
    def __init__(self, cause: OSError) -> None:
        super().__init__(cause)
        self.cause = cause


def _transaction(journal, root: Path, command: str, overrides: list[str], dvc_args: list[str]) -> int:
    """Compose and reproduce under the journal: all of it, or the workspace as it was."""
    import signal

    from pipeline.base import integrity
    from pipeline.base.errors import PipelineError
    from pipeline.base.stops import on_stop_signals
    from pipeline.base.files import clean_stale_temporaries
    from pipeline.base.paths import Layout, download_cache
    from pipeline.compose import compose_params
    from pipeline.stages._cli import ERROR_FILE_ENV
    from pipeline.stages.tokenize import check_tracking

    work_dirs = [*Layout(root).work_dirs, download_cache(root)]
    clean_stale_temporaries(work_dirs, dvc_idle=True)  # what a killed run left (its DVC too: none runs yet)
    with tempfile.TemporaryDirectory(prefix="pe-repro-") as tmp:
        error_file = Path(tmp) / "error.txt"
        # the stage commands say `python`: make it this interpreter even when its venv is not activated
        env = dict(
            os.environ,
            PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
            **{ERROR_FILE_ENV: str(error_file)},
        )
        dvc = _start_dvc(dvc_args, root, env)
        try:
            for problem, then in integrity.check(root):  # what DVC would take for its cached or recorded outputs
                print(f"repro: {problem}: removed, so that {then}", file=sys.stderr)
            # a full disk here changes nothing; the DVC cache is only added to: a run put back leaves no object in it
            journal.begin(guarded_paths(root), added=integrity.cache_folders(root), command=command)
            try:  # validates and checks input files before writing params.yaml
                cfg, composed = compose_params(overrides, root), 0
            except PipelineError as exc:
                print(f"error: {exc}", file=sys.stderr)
                composed = 2
            if composed == 0:
                check_tracking(cfg, root)  # a dead MLflow server now, not after the computing
                status = _run_dvc(dvc)
                if status == 0:
                    journal.commit()
                    integrity.settle(root)  # the ctimes the journal's hard links moved
                    return 0
        except BaseException as exc:
            on_stop_signals(signal.SIG_IGN)  # a second Ctrl-C must not cut the rollback short
            _end_dvc(dvc)
            exc.add_note(_rollback(journal, work_dirs, root))
            raise
        on_stop_signals(signal.SIG_IGN)
        _end_dvc(dvc)
        stage_error = error_file.exists()  # a stage reported a user error (and DVC its own failure after it)
        if stage_error:  # said first, so that it is not lost if putting the workspace back fails too
            print(error_file.read_text(encoding="utf-8").strip(), file=sys.stderr)
        done = NOTHING_CHANGED + _rollback(journal, work_dirs, root)
        if composed:
            return composed  # compose said why; it writes nothing before its checks pass
        print(f"{done[0].upper()}{done[1:]}." if stage_error else f"repro: {done}", file=sys.stderr)
        return 2 if stage_error else status


def _rollback(journal, work_dirs: list[Path], root: Path) -> str:
    """Put the workspace back; an MLflow run that the run's figures stage logged (its record, mlflow_last_run.json,
    is put back too) is ended FAILED. Returns the words that say so ("" when no run was logged)."""
    from pipeline.base.files import clean_stale_temporaries, read_json
    from pipeline.base.paths import Layout

    def logged() -> dict:  # the record of the MLflow run the figures stage logged last (pipeline.outputs.run_record)
        try:
            return read_json(Layout(root).mlflow_last_run)
        except (OSError, ValueError):
            return {}

    record = logged()
    try:
        journal.rollback()
    except OSError as exc:
        raise _RestoreFailed(exc) from None
    clean_stale_temporaries(work_dirs)  # the killed stages' temporaries
    if record.get("run_id") in (None, logged().get("run_id")):
        return ""
    from pipeline.outputs.tracking import fail_put_back

    return fail_put_back(record, root)


if __name__ == "__main__":
    raise SystemExit(main())
