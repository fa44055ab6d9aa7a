"""Registers the pipeline's config schema with Hydra wherever Hydra scans for plugins.

DVC's `dvc exp run -S ...` composes conf/ in its own process (dvc.utils.hydra.compose_and_dump): it puts the
project root on sys.path and calls `hydra.core.plugins.Plugins.instance()`, which imports every module of the
`hydra_plugins` namespace package, this one included. Importing it stores the schema that conf/config.yaml names
(config_schema, pipeline.config.schema.register); each stage that DVC then runs refuses keys it does not declare.
(No hydra_plugins/__init__.py: the namespace is shared with the installed Hydra launchers.)

DVC composes the files of conf/ as they are: a list there too long to compose in reasonable time stops DVC's process
here, before it composes, with one message and exit 2 (pipeline.config.limits.check_conf_lists). So does a
`dvc exp run` in the workspace whose overrides `python -m pipeline.compose` would refuse (`check_exp_run`): DVC
stashes the workspace before it composes and puts it back when composing stops, so a refused value leaves
params.yaml, dvc.lock and every output as they were, where a stage's refusal comes after DVC wrote params.yaml and
removed that stage's outputs. The check composes in a child process (`main`): composing here, inside Hydra's scan of its plugins, would start that scan again.
"""

import subprocess
import sys

from pipeline.base.errors import PipelineError
from pipeline.base.paths import Layout, checkout_root
from pipeline.config.limits import check_conf_lists
from pipeline.config.schema import register


def exp_run_overrides(argv: list[str]) -> list[str] | None:
    """The overrides of params.yaml when `argv` (DVC's command line) is `dvc exp run -S ...` in the workspace, else
    None: a queued run (--queue, --run-all) composes in the workspace but runs in a copy of its own."""
    try:
        from dvc.cli import parse_args
        from dvc.utils.cli_parse import to_path_overrides

        args = parse_args(argv)
    except (Exception, SystemExit):  # no DVC here, or not its command line
        return None
    if getattr(args.func, "__name__", "") != "CmdExperimentsRun" or args.queue or args.run_all or not args.set_param:
        return None
    return to_path_overrides(args.set_param).get("params.yaml")


def check_exp_run(root) -> None:
    """Under `dvc exp run -S ...`: its overrides checked by a child process (`main`); exit 2 when it refuses them
    (it printed why)."""
    overrides = exp_run_overrides(sys.argv[1:])
    child = f"import sys; from {__name__} import main; raise SystemExit(main(sys.argv[1:]))"
    if overrides and subprocess.run([sys.executable, "-c", child, *overrides], cwd=root).returncode != 0:
        raise SystemExit(2)


def main(overrides: list[str]) -> int:
    """conf/ composed with `overrides` and checked as `python -m pipeline.compose` checks it, and the files it names
    listed in dvc.yaml as the stages check them; writes nothing."""
    from pipeline.compose import PORTABLE_KEYS, checked
    from pipeline.inputs.input_files import check_tracked

    root = checkout_root()
    try:
        params, _ = checked(overrides, root)
        check_tracked(params, root, Layout(root).dvc_yaml, PORTABLE_KEYS)
    except PipelineError as exc:
        print(f"error: {exc} Nothing was run or written.", file=sys.stderr)
        return 2
    return 0


register()
try:
    _root = checkout_root()
except FileNotFoundError:  # Hydra scanning its plugins outside the project
    _root = None
if _root is not None:
    try:
        check_conf_lists(Layout(_root).conf_dir)
    except PipelineError as exc:  # SystemExit: Hydra's scan of plugins catches only ImportError
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    if "dvc.cli" in sys.modules:
        check_exp_run(_root)
