"""Files the config names (texts.file, glove.path, glove.zip, study.texts_file): resolved and checked one way
everywhere.

They are the user's project data: a file must resolve (`..` and symbolic links followed) inside the project, outside
its metadata (.git/, .dvc/), or inside a folder the environment variable PE_INPUT_DIRS allows (absolute paths,
separated by ':'; e.g. a shared folder of GloVe files). What a file holds reaches the DVC cache, the report and MLflow,
so a config that names /etc/shadow or ~/.ssh/id_rsa is refused before anything reads it.
"""

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


ALLOW_ENV = "PE_INPUT_DIRS"
METADATA = (".git", ".dvc")  # the project's own folders, not its data


def allowed_dirs() -> list[Path]:
    """The folders outside the project that $PE_INPUT_DIRS allows input files in (absolute paths, resolved)."""
    return [Path(os.path.realpath(p)) for p in os.environ.get(ALLOW_ENV, "").split(os.pathsep) if os.path.isabs(p)]


def check_inside(path: Path, root: Path, label: str, fix: str) -> None:
    """Refuse `path` (absolute) unless it resolves inside `root` (not under .git/ or .dvc/) or an allowed folder."""
    real, project = Path(os.path.realpath(path)), Path(os.path.realpath(root))
    shown = str(path) if real == Path(os.path.normpath(path)) else f"{path} (which resolves to {real})"
    if real.is_relative_to(project):
        top = real.relative_to(project).parts[:1]
        if top and top[0] in METADATA:
            raise PipelineError(
                f"{label}: {shown} lies in the project's {top[0]}/ folder, which holds no input data. {fix}"
            )
        return
    if any(real.is_relative_to(folder) for folder in allowed_dirs()):
        return
    raise PipelineError(
        f"{label}: {shown} lies outside the project {project}: the pipeline reads only project data (what it "
        f"reads reaches the DVC cache, the report and MLflow). {fix} To read files of a folder outside the project, "
        f"allow it: `export {ALLOW_ENV}=/that/folder` (several: separated by '{os.pathsep}')."
    )


def user_file(value: str | Path, root: Path, label: str, fix: str) -> Path:
    """`value` as a path (`~` expanded, relative paths taken from `root`) that must be a readable regular file of the
    project's data (`check_inside`).

    Raises PipelineError `"{label}: ... lies outside the project"`, `"{label}: no such file (...)"`, `"{label}: ...
    is a directory"` (or a FIFO, a device, a socket, a link to a missing file) or `"... cannot be read (permission
    denied)"`, followed by `fix`. Nothing is opened: a FIFO or a device would block or never end.
    """
    path = Path(value).expanduser()
    path = path if path.is_absolute() else root / path
    check_inside(path, root, label, fix)
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
