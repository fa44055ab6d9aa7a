"""The input files a (validated) config names, checked when it is composed: before anything is written; and
tracked: `input_file_deps` gives them as DVC deps (pipeline.dvcyaml adds them to the stage that reads them), and
`check_tracked` refuses a run whose dvc.yaml does not list them (DVC would not see an edit of the file)."""

from __future__ import annotations

import os
from pathlib import Path

from pipeline.base.errors import PipelineError
from pipeline.config.schema import Config
from pipeline.inputs.glove_sources import check_local_file
from pipeline.inputs.texts import read_sentences


def check_inputs(params: Config, root: Path) -> list[str]:
    """texts.file (a file of sentences) and the local file of the GloVe source (glove.path, glove.zip: the kinds of
    pipeline.inputs.glove_sources.SOURCES that read one), relative to `root`: project data
    (pipeline.inputs.local_files; the study stage checks study.texts_file the same way before it reads it). Returns
    the sentences (of texts.file or texts.sentences).

    Raises PipelineError naming the key, the file and the fix.
    """
    if params.texts.file is not None:
        sentences = read_sentences(params.texts.file, root)  # the tokenize stage's own parser
    else:
        sentences = list(params.texts.sentences)
    check_local_file(params.glove, root)
    return sentences


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
