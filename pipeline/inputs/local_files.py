"""Files the config names (texts.file, glove.path, glove.zip): resolved and checked one way everywhere."""
from __future__ import annotations

from pathlib import Path

from pipeline.base.errors import PipelineError


def user_file(value: str | Path, root: Path, label: str, fix: str) -> Path:
    """`value` as a path (`~` expanded, relative paths taken from `root`) that must be a regular file.

    Raises PipelineError `"{label}: no such file (...)"` or `"{label}: ... is a directory"`, followed by `fix`.
    """
    path = Path(value).expanduser()
    path = path if path.is_absolute() else root / path
    if not path.exists():
        raise PipelineError(f"{label}: no such file ({path}). {fix}")
    if not path.is_file():
        raise PipelineError(f"{label}: {path} is {'a directory' if path.is_dir() else 'not a regular file'}. {fix}")
    return path


def glove_file(key: str, value: str, root: Path, what: str) -> Path:
    """glove.path or glove.zip as an existing regular file; `what` says what it should hold."""
    return user_file(value, root, f"{key} = {value!r}",
                     f"Fix: point {key} at {what}, or use the embedded default (glove=6B-50d).")
