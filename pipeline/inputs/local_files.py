"""Files the config names (texts.file, glove.path, glove.zip): resolved and checked one way everywhere."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from pipeline.base.errors import PipelineError

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def user_file(value: str | Path, root: Path, label: str, fix: str) -> Path:
    """`value` as a path (`~` expanded, relative paths taken from `root`) that must be a readable regular file.

    Raises PipelineError `"{label}: no such file (...)"`, `"{label}: ... is a directory"` (or a FIFO, a device, a
    socket, a link to a missing file) or `"... cannot be read (permission denied)"`, followed by `fix`. Nothing is
    opened: a FIFO or a device would block or never end.
    """
    path = Path(value).expanduser()
    path = path if path.is_absolute() else root / path
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        if path.is_symlink():
            raise PipelineError(
                f"{label}: {path} is a symbolic link to a missing file ({os.readlink(path)}). {fix}"
            ) from None
        raise PipelineError(f"{label}: no such file ({path}). {fix}") from None
    except PermissionError:
        raise PipelineError(
            f"{label}: {path} cannot be reached (permission denied on a folder above it). {fix}"
        ) from None
    except OSError as exc:  # a loop of links, a name too long, ...
        raise PipelineError(f"{label}: {path} cannot be used ({exc.strerror}). {fix}") from None
    if not stat.S_ISREG(mode):
        kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
        raise PipelineError(f"{label}: {path} is {kind}, not a regular file. {fix}")
    if not os.access(path, os.R_OK):
        raise PipelineError(f"{label}: {path} cannot be read (permission denied). {fix}")
    return path


def glove_file(key: str, value: str, root: Path, what: str) -> Path:
    """glove.path or glove.zip as an existing regular file; `what` says what it should hold."""
    return user_file(
        value, root, f"{key} = {value!r}", f"Fix: point {key} at {what}, or use the embedded default (glove=6B-50d)."
    )
