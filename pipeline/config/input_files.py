"""The input files a (validated) config names, checked when it is composed: before anything is written; and
tracked: `input_file_deps` gives them as DVC deps (pipeline.dvcyaml adds them to the stage that reads them), and
`check_tracked` refuses a run whose dvc.yaml does not list them (DVC would not see an edit of the file)."""

from __future__ import annotations

import codecs
import os
import zipfile
from pathlib import Path

from pipeline.base.errors import PipelineError
from pipeline.inputs.local_files import glove_file
from pipeline.inputs.texts import read_sentences

FIRST_LINE_LIMIT = 1 << 20  # bytes of a GloVe file's first line that are decoded (a line is a few KB)


def check_inputs(params: dict, root: Path) -> list[str]:
    """texts.file (a file of sentences), glove.path (source=path) and glove.zip (source=zip), relative to `root`.
    Returns the sentences (of texts.file or texts.sentences).

    Raises PipelineError naming the key, the file and the fix.
    """
    if params["texts"]["file"] is not None:
        sentences = read_sentences(params["texts"]["file"], root)  # the tokenize stage's own parser
    else:
        sentences = list(params["texts"]["sentences"])
    glove = params["glove"]
    if glove["source"] == "path":
        path = glove_file("glove.path", glove["path"], root, "a GloVe text file")
        if path.suffix == ".zip":  # glove=path reads a .zip as a zip
            _check_zip("glove.path", path)
        else:
            _check_glove_text(path)
    elif glove["source"] == "zip":
        _check_zip("glove.zip", glove_file("glove.zip", glove["zip"], root, "a zip holding a GloVe text file"))
    return sentences


def _check_glove_text(path: Path) -> None:
    fix = "Fix: point glove.path at a GloVe text file (UTF-8, a word and its numbers per line)."
    with open(path, "rb") as handle:
        first = handle.readline(FIRST_LINE_LIMIT)
    if not first:
        raise PipelineError(f"glove.path = {str(path)!r} is empty. {fix}")
    try:
        codecs.getincrementaldecoder("utf-8")().decode(
            first, final=len(first) < FIRST_LINE_LIMIT
        )  # cut: may end mid-char
    except UnicodeDecodeError as exc:
        raise PipelineError(
            f"glove.path = {str(path)!r}: its first line is not UTF-8 ({exc.reason} at byte {exc.start}). {fix}"
        ) from None


def _check_zip(key: str, path: Path) -> None:
    if not zipfile.is_zipfile(path):
        raise PipelineError(
            f"{key} = {str(path)!r} is not a zip file. Fix: point {key} at a zip holding a GloVe "
            "text file (e.g. glove.6B.zip), or use glove=path for a text file."
        )


def input_file_deps(params: dict, root: Path, keys: tuple[str, ...], inside: tuple[str, ...] = ()) -> list[str]:
    """The files that the config keys `keys` (e.g. 'texts.file') name, as dvc.yaml deps: relative POSIX paths inside
    `root`, absolute ones outside; files under one of the folders `inside` (already deps, e.g. data/texts) left out."""
    deps = []
    for key in keys:
        group, name = key.split(".")
        value = (params.get(group) or {}).get(name)
        if value is None:
            continue
        path = Path(value).expanduser()
        path = Path(os.path.normpath(path if path.is_absolute() else root / path))
        dep = (path.relative_to(root) if path.is_relative_to(root) else path).as_posix()
        if not any(dep == folder or dep.startswith(folder.rstrip("/") + "/") for folder in inside):
            deps.append(dep)
    return deps


INPUT_FILE_KEYS = ("texts.file", "glove.path", "glove.zip")  # = pipeline.registry's Stage.input_files, together


def check_tracked(params: dict, root: Path, dvc_yaml: Path) -> None:
    """Refuse a run whose dvc.yaml does not list a file the config names (a plain `dvc exp run -S texts.file=...`
    composes params.yaml but not dvc.yaml): DVC would never see an edit of that file."""
    import yaml

    if not dvc_yaml.exists():  # not run by DVC (an in-process run): nothing to keep in step
        return
    stages = (yaml.safe_load(dvc_yaml.read_text(encoding="utf-8")) or {}).get("stages", {})
    listed = {dep for stage in stages.values() for dep in stage.get("deps", [])}
    missing = [
        dep
        for dep in input_file_deps(params, root, INPUT_FILE_KEYS)
        if dep not in listed and not any(dep.startswith(folder.rstrip("/") + "/") for folder in listed)
    ]
    if missing:
        raise PipelineError(
            f"dvc.yaml does not list {', '.join(missing)}, which the config reads: DVC would not "
            "re-run anything when it changes. Fix: compose with `python -m pipeline.compose "
            "<overrides>` (it regenerates dvc.yaml) or run `python -m pipeline.repro <overrides>`, "
            "then `dvc repro` / `dvc exp run`."
        )
