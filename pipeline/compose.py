"""`python -m pipeline.compose [overrides]`: write params.yaml from conf/ (what `dvc exp run` does before running).

The composed config is validated against the schema, and the input files it names are checked, before
anything is written: on a mistake it prints one `error: ...` line, exits 2 and leaves params.yaml as it was.
With --length: the length experiment's experiments/length/params.yaml from conf/length_experiment.yaml (its time and
memory estimates checked), for `dvc repro` in experiments/length/.

Examples:
    python -m pipeline.compose
    python -m pipeline.compose glove=6B-100d sweep.w2=10 'texts.sentences=[a b c, c b a]'
    python -m pipeline.compose --length length=quick
"""

from __future__ import annotations

import sys
from pathlib import Path

from pipeline.base.errors import PipelineError
from pipeline.base.locks import workspace_lock
from pipeline.base.paths import Layout, checkout_root
from pipeline.config import check, compose, write_params
from pipeline.inputs.glove_sources import FILE_KEYS
from pipeline.inputs.input_files import OTHER_FILE_KEYS, check_portable
from pipeline.config.schema import GROUPS, LENGTH, LENGTH_GROUPS, Config

PORTABLE_KEYS = (*OTHER_FILE_KEYS, *FILE_KEYS)  # every config key that names a file: none may be absolute
LENGTH_FLAG = "--length"


def groups_help(root: Path, groups: tuple[str, ...] = GROUPS) -> str:
    """One line per config group of the schema: `  group: option, option, ...` (for --help here and in
    pipeline.repro); the options are the group's files in conf/<group>/. Other folders under conf/ are no groups."""
    conf = Layout(root).conf_dir
    return "\n".join(
        f"  {group}: {', '.join(sorted(f.stem for f in (conf / group).glob('*.yaml')))}" for group in sorted(groups)
    )


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if any(a in ("-h", "--help") for a in argv):
        print(__doc__)
        print(groups_help(checkout_root()))
        print(f"with {LENGTH_FLAG}:")
        print(groups_help(checkout_root(), LENGTH_GROUPS))
        return 0
    root = checkout_root()
    length = LENGTH_FLAG in argv
    workspace = Layout(root).length_dir if length else root
    try:
        with workspace_lock(workspace, " ".join(["python -m pipeline.compose", *argv])):
            if length:
                return _compose_length([a for a in argv if a != LENGTH_FLAG], root)
            compose_params(argv, root)
            return 0
    except PipelineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def compose_params(argv: list[str], root: Path):
    """Compose conf/ with `argv`, check it (the schema's rules, the files it names, the limits: the one validation
    of this process), then write params.yaml and, when its input files changed, dvc.yaml. Returns the config as the
    schema's dataclasses; raises PipelineError, having written nothing, on a mistake."""
    from pipeline.dvcyaml import write_if_changed

    params, cfg = checked(argv, root)
    path = write_params(params, root, argv)
    if write_if_changed(root, params=params):  # the files the config names are deps of the stages that read them
        print(f"wrote {Layout(root).dvc_yaml} (the input files of this config are its deps)")
    print(f"wrote {path}" + (f" with {' '.join(argv)}" if argv else ""))
    return cfg


def checked(argv: list[str], root: Path) -> tuple[dict, Config]:
    """conf/ composed with `argv` and checked: the schema's rules, the files it names (portable: params.yaml and
    dvc.yaml are committed, no machine's folders), the limits. Raises PipelineError on a mistake; writes nothing."""
    params = compose(argv, root)
    check_portable(params, root, PORTABLE_KEYS)
    return params, check(params, root)


def _compose_length(argv: list[str], root: Path) -> int:
    from pipeline.base.worker_pool import usable_cores
    from pipeline.config.limits import check_length
    from pipeline.config.schema import validate
    from pipeline.dvcyaml import write_if_changed
    from pipeline.stages.registry import LENGTH_PIPELINE

    params = compose(argv, root, LENGTH)  # a PipelineError: main says it
    cfg = validate(params, LENGTH.schema)
    # the time limit where the device is known without importing torch (the stage checks `auto` again)
    check_length(cfg.length, cfg.length.workers or usable_cores(), on_cpu=cfg.length.device == "cpu")
    path = write_params(params, root, argv, LENGTH)
    if write_if_changed(root, LENGTH_PIPELINE, params):
        print(f"wrote {getattr(Layout(root), LENGTH_PIPELINE.dvc_yaml)}")
    print(f"wrote {path}" + (f" with {' '.join(argv)}" if argv else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
