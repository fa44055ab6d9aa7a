"""params.yaml, the composed config the DVC stages read (generated from conf/: see pipeline.config)."""

from __future__ import annotations

from pathlib import Path

import yaml

from pipeline.base.errors import PipelineError


def read_params_file(path: Path) -> dict:
    """The mapping in params.yaml; a missing or malformed file is a user error that names the fix."""
    if not path.exists():
        raise PipelineError(f"{path} does not exist: run `python -m pipeline.compose` to generate it from conf/.")
    try:
        with open(path, encoding="utf-8") as handle:
            # libyaml's loader when PyYAML has it: 10x faster on the long lists of a 10,000-pair sweep
            params = yaml.load(handle, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise PipelineError(
            f"{path} is not valid YAML ({' '.join(str(exc).split())}): regenerate it with `python -m pipeline.compose`."
        ) from None
    if not isinstance(params, dict):
        raise PipelineError(f"{path} is not a mapping: regenerate it with `python -m pipeline.compose`.")
    return params
