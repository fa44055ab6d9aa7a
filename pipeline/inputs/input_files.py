"""The files a config names (texts.file, study.texts_file and the GloVe source's glove.<kind>), checked in one place: where they
may be, how the committed config names them, and that DVC tracks them.

- Where: they are the user's project data. A file must resolve (`..` and symbolic links followed) inside the project,
  outside its metadata (.git/, .dvc/), or inside a folder the environment variable PE_INPUT_DIRS allows (absolute
  paths, separated by ':'; e.g. a shared folder of GloVe files). What a file holds reaches the DVC cache, the report
  and MLflow, so a config that names /etc/shadow or ~/.ssh/id_rsa is refused before anything reads it (`user_file`,
  `glove_file`).
- How: by a path relative to the project, never an absolute one that a colleague's clone lacks (`check_portable`).
- Tracked: `input_file_deps` gives them as DVC deps (pipeline.dvcyaml adds them to the stage that reads them), and
  `check_tracked` refuses a run whose dvc.yaml does not list them (DVC would not see an edit of the file).
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
        f"reads reaches the DVC cache, the report and MLflow). {fix} Copy it into the project (texts: under "
        f"data/texts/) or let DVC track a copy (`dvc import-url {path} data/texts/{path.name}`); to read files of a "
        f"folder outside the project, allow it: `export {ALLOW_ENV}=/that/folder` (several: separated by "
        f"'{os.pathsep}') and name the file relative to the project."
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
    """The file of a GloVe source (glove.<kind>: pipeline.inputs.glove_sources.FILE_KEYS) as an existing regular file;
    `what` says what it should hold."""
    return user_file(
        value, root, f"{key} = {value!r}", f"Fix: point {key} at {what}, or use the embedded default (glove=6B-50d)."
    )


# the keys of the files a config names, besides the GloVe source's (pipeline.inputs.glove_sources.FILE_KEYS, one per
# source kind that reads a file; that module imports this one)
OTHER_FILE_KEYS = ("texts.file", "study.texts_file")


def check_portable(params: dict, root: Path, keys: tuple[str, ...]) -> None:
    """Refuse a file named by an absolute path (or `~`) where the composed config is committed (params.yaml, and
    dvc.yaml's deps): a colleague's clone has no such path. The fix gives the path relative to the project, which
    params.yaml and dvc.yaml record as they are (DVC follows `../` deps), or a copy the project tracks.

    Raises PipelineError naming the key, the relative path that works and the copies that DVC tracks."""
    for key in keys:
        group, name = key.split(".")
        value = (params.get(group) or {}).get(name)
        if value is None or not Path(str(value)).expanduser().is_absolute():
            continue
        path = Path(str(value)).expanduser()
        relative = Path(os.path.relpath(path, root)).as_posix()
        folder = "data/texts" if group in ("texts", "study") else "data"  # sentences go with the project's texts
        raise PipelineError(
            f"{key} = {value!r} is an absolute path, and params.yaml and dvc.yaml (committed) would carry it to "
            f"machines that lack it. Fix: give it relative to the project ({key}={relative}); or copy the file into "
            f"the project (`cp {value} {folder}/` then {key}={folder}/{path.name}); or let DVC track a copy "
            f"(`dvc import-url {value} {folder}/{path.name}`, or `dvc add` on a copy)."
        )


def input_file_deps(params: dict, root: Path, keys: tuple[str, ...]) -> list[str]:
    """The files that the config keys `keys` (e.g. 'texts.file') name, as dvc.yaml deps: POSIX paths relative to
    `root` (`../` for a file outside it, which DVC follows), so that dvc.yaml names no machine's folders."""
    deps = []
    for key in keys:
        group, name = key.split(".")
        value = (params.get(group) or {}).get(name)
        if value is not None:
            path = Path(value).expanduser()
            path = Path(os.path.normpath(path if path.is_absolute() else root / path))
            deps.append(Path(os.path.relpath(path, root)).as_posix())
    return deps


def check_tracked(params: dict, root: Path, dvc_yaml: Path, keys: tuple[str, ...]) -> None:
    """Refuse a run whose dvc.yaml does not list a file that the config keys `keys` (a stage's `input_files` in the
    registry) name (a plain `dvc exp run -S texts.file=...` composes params.yaml but not dvc.yaml): DVC would never
    see an edit of that file."""
    import yaml

    deps = input_file_deps(params, root, keys)
    if not deps or not dvc_yaml.exists():  # no such file; or not run by DVC (an in-process run): nothing to check
        return
    stages = (yaml.safe_load(dvc_yaml.read_text(encoding="utf-8")) or {}).get("stages", {})
    listed = {dep for stage in stages.values() for dep in stage.get("deps", [])}
    missing = [
        dep
        for dep in deps
        if dep not in listed and not any(dep.startswith(folder.rstrip("/") + "/") for folder in listed)
    ]
    if missing:
        raise PipelineError(
            f"dvc.yaml does not list {', '.join(missing)}, which the config reads: DVC would not "
            "re-run anything when it changes. Fix: compose with `python -m pipeline.compose "
            "<overrides>` (it regenerates dvc.yaml) or run `python -m pipeline.repro <overrides>`, "
            "then `dvc repro` / `dvc exp run`."
        )
