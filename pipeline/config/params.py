"""conf/ -> params.yaml, and params.yaml -> a validated config for the stages.

`conf/` (Hydra) is the single source of truth. `python -m pipeline.compose [overrides]` and
`dvc exp run -S ...` write `params.yaml` from it; DVC stages read `params.yaml`. Since a plain
`dvc repro` does not compose, each stage it runs checks that `params.yaml` still agrees with `conf/`
(see `check_fresh`; pipeline.stages._cli) and refuses a stale one with a message that says how to
regenerate it; the tokenize stage depends on conf/, so that an edit of conf/ alone reaches that check.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Iterable

import yaml

from pipeline.base.errors import PipelineError
from pipeline.base.params_file import read_params_file
from pipeline.base.paths import Layout, checkout_root
from pipeline.base.secrets import redact
from pipeline.config.input_files import check_inputs
from pipeline.config.limits import check_limits, check_list_overrides
from pipeline.base.trees import flatten
from pipeline.config.schema import MAIN, Composition, Config, unknown_key_message, validate

CONFIG_NAME = MAIN.config_name
PARAMS_HEADER = (
    "# GENERATED from conf/ by `python -m pipeline.compose` (or `dvc exp run`): do not edit.\n"
    "# Change conf/ or pass overrides instead, e.g. `python -m pipeline.compose sweep.w2=10`.\n"
)
LENGTH_PARAMS_HEADER = (
    "# GENERATED from conf/ (length_experiment.yaml) by `python -m pipeline.compose --length` (or `dvc exp run` in\n"
    "# experiments/length/): do not edit. Change conf/ or pass overrides instead, e.g.\n"
    "# `python -m pipeline.compose --length length=quick`.\n"
)


def compose(overrides: Iterable[str] = (), root: Path | None = None, composition: Composition = MAIN) -> dict:
    """Compose conf/ with Hydra overrides into a plain dict (the content of params.yaml, or of `composition`'s params
    file: its primary config in conf/)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.errors import HydraException
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    from pipeline.config.schema import register

    register()
    conf_dir = Layout(root or checkout_root()).conf_dir
    overrides = list(overrides)
    check_list_overrides(overrides)  # before Hydra parses millions of items
    try:
        with initialize_config_dir(config_dir=str(conf_dir), version_base="1.3"):
            cfg = hydra_compose(config_name=composition.config_name, overrides=overrides)
    except (HydraException, OmegaConfBaseException) as exc:
        raise PipelineError(
            redact(f"cannot compose conf/ with overrides {list(overrides)}: {_explain(exc, composition.schema)}")
        ) from None
    return OmegaConf.to_container(cfg, resolve=False)


def _explain(exc: Exception, schema: type = Config) -> str:
    """Hydra's message on one line, with our fix; an unknown key gets the schema's message (Hydra's own
    suggests `+key=value`, which the schema refuses too)."""
    message = " ".join(str(exc).split())
    cause = getattr(exc.__cause__, "msg", None)  # e.g. why "Error merging override encoding.max_len=abc"
    if cause:
        message += f" ({str(cause).splitlines()[0]})"
    unknown = re.match(r"Could not override '([^']+)'\. To append to your config use \+", message)
    if unknown:
        return unknown_key_message(unknown.group(1), schema)
    return f"{message}. Fix: check the key and option names against conf/ (options: python -m pipeline.compose --help)."


def dump_params(params: dict, composition: Composition = MAIN) -> str:
    header = PARAMS_HEADER if composition is MAIN else LENGTH_PARAMS_HEADER
    return header + yaml.safe_dump(params, sort_keys=False, allow_unicode=True, width=100)


def params_path(root: Path | None = None, composition: Composition = MAIN) -> Path:
    """The params file of `composition` (params.yaml for the pipeline)."""
    return getattr(Layout(root or checkout_root()), composition.params)


def write_params(params: dict, root: Path | None = None, composition: Composition = MAIN) -> Path:
    from pipeline.base.files import write_text

    path = params_path(root, composition)
    write_text(path, dump_params(params, composition))
    return path


def read_params(root: Path | None = None, composition: Composition = MAIN) -> dict:
    return read_params_file(params_path(root, composition))


def check(params: dict, root: Path) -> Config:
    """Everything that can be known before running: the schema's rules, then `check_runnable`. Returns the validated
    config as the schema's dataclasses."""
    cfg = validate(params)
    check_runnable(cfg, root)
    return cfg


def check_runnable(cfg: Config, root: Path) -> None:
    """What a validated config needs beyond the schema: the input files it names, then the limits (memory and figure
    count estimates, pipeline.config.limits)."""
    check_limits(cfg, check_inputs(cfg, root))


def _newest_conf_file(root: Path) -> tuple[float, Path | None]:
    newest, newest_path = 0.0, None
    for path in Layout(root).conf_dir.rglob("*.yaml"):
        mtime = path.stat().st_mtime
        if mtime > newest:
            newest, newest_path = mtime, path
    return newest, newest_path


def check_fresh(params: dict, root: Path | None = None, composition: Composition = MAIN) -> None:
    """Refuse a params.yaml (or `composition`'s params file) that conf/ has moved past.

    params.yaml is fresh when either
      - it equals conf/ composed with the group options it names (`<group>.name`), or
      - it is newer than every file in conf/ (it was just composed with key overrides,
        e.g. by `dvc exp run -S sweep.w2=10`).
    Otherwise conf/ was edited after params.yaml was written, and `dvc repro` would silently
    run the old values.
    """
    root = root or checkout_root()
    newest, newest_path = _newest_conf_file(root)
    if params_path(root, composition).stat().st_mtime >= newest:
        return
    choices = [
        f"{group}={params[group]['name']}"
        for group in composition.groups
        if isinstance(params.get(group), dict) and "name" in params[group]
    ]
    expected = compose(choices, root, composition)
    if expected == params:
        return
    now, was = flatten(expected), flatten(params)
    changed = sorted(key for key in now.keys() | was.keys() if now.get(key, "<absent>") != was.get(key, "<absent>"))
    shown = ", ".join(
        f"{k}: params.yaml={was.get(k, '<absent>')!r} conf/={now.get(k, '<absent>')!r}" for k in changed[:5]
    )
    more = f" (and {len(changed) - 5} more)" if len(changed) > 5 else ""
    if composition is MAIN:
        fix = (
            "run `python -m pipeline.compose` (plus your overrides) before `dvc repro`, or use "
            "`python -m pipeline.repro` / `dvc exp run`, which compose first."
        )
    else:
        fix = (
            "run `python -m pipeline.compose --length` (plus your overrides) before `dvc repro`, or use `dvc exp run`."
        )
    raise PipelineError(
        f"{composition.label} is stale: {newest_path.relative_to(root)} changed after it was composed, and they "
        f"disagree on {shown}{more}. Fix: {fix}"
    )


def load(root: Path | None = None) -> Config:
    """params.yaml, checked against conf/ and validated (what a stage run by a plain `dvc repro` checks), as a Config."""
    root = root or checkout_root()
    params = read_params(root)
    check_fresh(params, root)
    return validate(params)
