"""params.yaml, the composed config the DVC stages read (generated from conf/: see pipeline.config): its one reader
(`read_params_file`, which every command and stage reaches) and its stamp.

What composed it is recorded in it, on one comment line above the YAML:

    # composed: {"overrides": ["sweep.w2=10"], "sources_sha256": "<conf/ and the schema>", "sha256": "<the YAML>"}

`sha256` is the SHA-256 of every byte below the comments, so a params.yaml cut short (at a line boundary it still
parses: a list loses items) or edited by hand is refused by content, whatever its mtime. `sources_sha256` and
`overrides` say what it was composed from (pipeline.config.params.check_fresh). `overrides` is null in a file DVC's
`dvc exp run` wrote (DVC writes no comment; the first stage it runs records its composition, overrides unknown).
"""

from __future__ import annotations

import hashlib
import json
import shlex
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from pipeline.base.errors import PipelineError

if TYPE_CHECKING:
    from pipeline.config.schema import Composition

STAMP = "# composed: "


def body_sha256(body: str) -> str:
    return hashlib.sha256(body.encode("utf-8")).hexdigest()


def stamp_line(body: str, overrides: list[str] | None, sources_sha256: str) -> str:
    """The comment line that records how `body` (the YAML) was composed."""
    record = {"overrides": overrides, "sources_sha256": sources_sha256, "sha256": body_sha256(body)}
    return STAMP + json.dumps(record) + "\n"


def split(text: str) -> tuple[str, dict | None, str]:
    """(the leading comment lines, the stamp's record or None, the YAML below them) of a params.yaml's text."""
    lines = text.splitlines(keepends=True)
    count = next((i for i, line in enumerate(lines) if not line.startswith("#")), len(lines))
    record = None
    for line in lines[:count]:
        if line.startswith(STAMP):
            try:
                record = json.loads(line[len(STAMP) :])
            except ValueError:
                record = {}  # a damaged stamp: checked (and refused) like a wrong hash
    return "".join(lines[:count]), record, "".join(lines[count:])


def read_stamp(path: Path) -> dict | None:
    """The record of how params.yaml at `path` was composed (see the module docstring), or None without one."""
    return split(path.read_text(encoding="utf-8"))[1]


def read_params_file(path: Path, composition: Composition | None = None) -> dict:
    """The mapping in params.yaml at `path`, the params file of `composition` (default: the pipeline's); a missing,
    malformed, cut or edited file is a user error that names the fix (the composition's command)."""
    if composition is None:
        from pipeline.config.schema import MAIN as composition
    compose = composition.compose
    if not path.exists():
        raise PipelineError(f"{path} does not exist: run `{compose}` to generate it from conf/.")
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PipelineError(f"{path} is not UTF-8 ({exc.reason}): regenerate it with `{compose}`.") from None
    _, record, body = split(text)
    if record is not None and record.get("sha256") != body_sha256(body):
        overrides = record.get("overrides")
        again = f"{compose} {shlex.join(overrides)}".strip() if isinstance(overrides, list) else None
        fix = f"`{again}`" if again else f"`{compose}` plus the overrides you had"
        raise PipelineError(
            f"{path} is not what composing wrote: its YAML does not match the SHA-256 recorded on its "
            f"`{STAMP.strip()}` line (cut short or edited by hand; never edit it). Fix: write it again with {fix} (or "
            "`git checkout params.yaml` in its folder)."
        )
    try:
        # libyaml's loader when PyYAML has it, for the long lists of a large sweep
        # (docs/benchmarks-measurements.md#files-and-parsing)
        params = yaml.load(body, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as exc:
        raise PipelineError(
            f"{path} is not valid YAML ({' '.join(str(exc).split())}): regenerate it with `{compose}`."
        ) from None
    if not isinstance(params, dict):
        raise PipelineError(f"{path} is not a mapping: regenerate it with `{compose}`.")
    return params
