"""conf/ -> params.yaml, and params.yaml -> a validated config for the stages.

`conf/` (Hydra) is the single source of truth. `python -m pipeline.compose [overrides]` and
`dvc exp run -S ...` write `params.yaml` from it; DVC stages read `params.yaml`. Since a plain
`dvc repro` does not compose, each stage it runs checks that `params.yaml` still agrees with `conf/`
(see `check_fresh`; pipeline.stages._cli) and refuses a stale one with a message that says how to
regenerate it; the tokenize stage depends on conf/, so that an edit of conf/ alone reaches that check.
Both checks are by content: params.yaml records the SHA-256 of its YAML, of the sources it was composed from
(`sources_sha256`) and the overrides (pipeline.config.params_file), never by modification times.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Iterable

import yaml

from pipeline.base.errors import PipelineError
from pipeline.config.params_file import read_params_file, read_stamp, split, stamp_line
from pipeline.base.paths import Layout, checkout_root
from pipeline.base.secrets import redact
from pipeline.inputs.glove_sources import check_local_file
from pipeline.inputs.texts import read_sentences
from pipeline.config.limits import check_conf_lists, check_limits, check_list_overrides
from pipeline.base.trees import flatten
from pipeline.config.schema import MAIN, Composition, Config, compose_command, unknown_key_message, validate

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

    from pipeline.base import stops
    from pipeline.config.schema import register

    register()
    conf_dir = Layout(root or checkout_root()).conf_dir
    overrides = list(overrides)
    check_list_overrides(overrides)  # before Hydra parses millions of items
    check_conf_lists(conf_dir)  # and those in a file of conf/
    try:
        with initialize_config_dir(config_dir=str(conf_dir), version_base="1.3"):
            cfg = hydra_compose(config_name=composition.config_name, overrides=overrides)
    except (HydraException, OmegaConfBaseException) as exc:
        if stops.received is not None:  # OmegaConf turns the Interrupted of a stop signal into its own error
            raise stops.Interrupted(stops.received) from None
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
    return f"{message}. Fix: check the key and option names against conf/ (options: {compose_command(schema)} --help)."


def sources_sha256(root: Path) -> str:
    """SHA-256 of what a composition reads: every YAML file of conf/ (by path and bytes) and the schema's module,
    whose defaults every option file leaves out."""
    import hashlib
    import inspect

    digest = hashlib.sha256()
    conf = Layout(root).conf_dir
    for path in sorted(conf.rglob("*.yaml")):
        digest.update(f"{path.relative_to(conf).as_posix()}\0{path.stat().st_size}\0".encode())
        digest.update(path.read_bytes())
    digest.update(Path(inspect.getfile(Config)).read_bytes())  # the schema's module
    return digest.hexdigest()


def _header(composition: Composition) -> str:
    return PARAMS_HEADER if composition is MAIN else LENGTH_PARAMS_HEADER


def dump_params(
    params: dict, overrides: Iterable[str] | None = (), root: Path | None = None, composition: Composition = MAIN
) -> str:
    """params.yaml's text (or `composition`'s params file's): the header, the stamp (pipeline.config.params_file: the
    overrides, None when unknown, and the SHA-256s of the sources and of the YAML) and the YAML."""
    body = yaml.safe_dump(params, sort_keys=False, allow_unicode=True, width=100)
    overrides = None if overrides is None else list(overrides)
    return _header(composition) + stamp_line(body, overrides, sources_sha256(root or checkout_root())) + body


def params_path(root: Path | None = None, composition: Composition = MAIN) -> Path:
    """The params file of `composition` (params.yaml for the pipeline)."""
    return getattr(Layout(root or checkout_root()), composition.params)


def write_params(
    params: dict, root: Path | None = None, overrides: Iterable[str] = (), composition: Composition = MAIN
) -> Path:
    from pipeline.base.files import write_text

    root = root or checkout_root()
    path = params_path(root, composition)
    write_text(path, dump_params(params, overrides, root, composition))
    return path


def record_composition(root: Path, composition: Composition = MAIN) -> bool:
    """Stamp a params file that `dvc exp run` composed just now (DVC writes no stamp) with the SHA-256s of its YAML
    and of the sources, its overrides unknown: later runs check it by content too. Returns whether it wrote."""
    from pipeline.base.files import write_text

    path = params_path(root, composition)
    header, record, body = split(path.read_text(encoding="utf-8"))
    if record is not None:
        return False
    write_text(path, (header or _header(composition)) + stamp_line(body, None, sources_sha256(root)) + body)
    return True


def read_params(root: Path | None = None, composition: Composition = MAIN) -> dict:
    return read_params_file(params_path(root, composition), composition)


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


def check_inputs(params: Config, root: Path) -> list[str]:
    """texts.file and study.texts_file (files of sentences, dvc.yaml deps: DVC hashes them) and the local file of the
    GloVe source (glove.<kind>, for the kinds of pipeline.inputs.glove_sources.SOURCES that read one), relative to
    `root`: project data, regular files (pipeline.inputs.input_files). Returns the sentences (of texts.file or
    texts.sentences).

    Raises PipelineError naming the key, the file and the fix.
    """
    if params.texts.file is not None:
        sentences = read_sentences(params.texts.file, root)  # the tokenize stage's own parser
    else:
        sentences = list(params.texts.sentences)
    if params.study.texts_file is not None:
        read_sentences(params.study.texts_file, root, "study.texts_file")
    check_local_file(params.glove, root)
    return sentences


def check_fresh(params: dict, root: Path | None = None, composition: Composition = MAIN) -> None:
    """Refuse a params.yaml (`params`, as read; or `composition`'s params file) that conf/ has moved past, by content.

    params.yaml is fresh when either
      - the sources it records (`sources_sha256`: conf/ and the schema) are those of now, or
      - it equals conf/ composed now with the overrides it records (a change of the sources that changes nothing,
        e.g. a comment), or, when they are unknown (DVC wrote it), with the group options it names (`<group>.name`).
    Otherwise conf/ was edited after params.yaml was written, and `dvc repro` would silently run the old values.
    """
    root = root or checkout_root()
    record = read_stamp(params_path(root, composition)) or {}
    if record.get("sources_sha256") == sources_sha256(root):
        return
    overrides = record.get("overrides")
    if not isinstance(overrides, list):
        overrides = [
            f"{group}={params[group]['name']}"
            for group in composition.groups
            if isinstance(params.get(group), dict) and "name" in params[group]
        ]
    expected = compose(overrides, root, composition)
    if expected == params:
        return
    now, was = flatten(expected), flatten(params)
    changed = sorted(key for key in now.keys() | was.keys() if now.get(key, "<absent>") != was.get(key, "<absent>"))
    shown = ", ".join(
        f"{k}: params.yaml={was.get(k, '<absent>')!r} conf/={now.get(k, '<absent>')!r}" for k in changed[:5]
    )
    more = f" (and {len(changed) - 5} more)" if len(changed) > 5 else ""
    recorded = record.get("overrides")
    command = composition.compose
    fix = (
        f"`{(command + ' ' + shlex.join(recorded)).strip()}`"
        if isinstance(recorded, list)
        else f"`{command}` (plus your overrides)"
    )
    first = (
        "`python -m pipeline.repro` / `dvc exp run`, which compose first."
        if composition is MAIN
        else "`dvc exp run` there, which composes first."
    )
    raise PipelineError(
        f"{composition.label} is stale: conf/ (or the schema) changed after it was composed, and they disagree on "
        f"{shown}{more}. Fix: run {fix} before `dvc repro`, or use {first}"
    )


def load(root: Path | None = None) -> Config:
    """params.yaml, checked against conf/ and validated (what a stage run by a plain `dvc repro` checks), as a Config."""
    root = root or checkout_root()
    params = read_params(root)
    check_fresh(params, root)
    return validate(params)


def differences(params: dict, root: Path | None = None) -> list[str] | None:
    """What sets `params` apart from conf/'s defaults, as overrides: the recorded ones when params.yaml's stamp has
    them (pipeline.compose, pipeline.repro), else (`dvc exp run`, which records none) found by composing conf/:
    the groups whose option differs (`encoding=learned`), then every other key that differs from those options'
    values (`sweep.w2=10`). tracking.* is left out (where a run is logged is not what it is). None when neither
    can say (no stamp and no conf/ to compose: a folder holding only a params.yaml)."""
    root = root or checkout_root()
    stamp = read_stamp(Layout(root).params) if Layout(root).params.exists() else None
    if stamp is not None and stamp.get("overrides") is not None:
        return [o for o in stamp["overrides"] if not o.lstrip("+~").startswith("tracking.")]
    if not Layout(root).conf_dir.is_dir():
        return None
    default = compose((), root)
    groups = [
        f"{group}={value['name']}"
        for group, value in params.items()
        if isinstance(value, dict) and "name" in value and value["name"] != default.get(group, {}).get("name")
    ]
    try:
        base = compose(groups, root) if groups else default
    except PipelineError:  # an option not named as its file: the keys that differ say it
        groups, base = [], default
    flat_base = flatten(base)
    keys = [
        f"{key}={json.dumps(value) if isinstance(value, (list, dict)) else value}"
        for key, value in flatten(params).items()
        if flat_base.get(key, ...) != value and not key.startswith("tracking.")
    ]
    return groups + keys
