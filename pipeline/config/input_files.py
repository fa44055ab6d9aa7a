"""The input files a (validated) config names, checked when it is composed: before anything is written."""
from __future__ import annotations

import codecs
import zipfile
from pathlib import Path

from pipeline.base.errors import PipelineError
from pipeline.inputs.local_files import glove_file
from pipeline.inputs.texts import read_sentences

FIRST_LINE_LIMIT = 1 << 20   # bytes of a GloVe file's first line that are decoded (a line is a few KB)


def check_inputs(params: dict, root: Path) -> list[str]:
    """texts.file (a file of sentences), glove.path (source=path) and glove.zip (source=zip), relative to `root`.
    Returns the sentences (of texts.file or texts.sentences).

    Raises PipelineError naming the key, the file and the fix.
    """
    if params["texts"]["file"] is not None:
        sentences = read_sentences(params["texts"]["file"], root)   # the tokenize stage's own parser
    else:
        sentences = list(params["texts"]["sentences"])
    glove = params["glove"]
    if glove["source"] == "path":
        path = glove_file("glove.path", glove["path"], root, "a GloVe text file")
        if path.suffix == ".zip":   # glove=path reads a .zip as a zip
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
        codecs.getincrementaldecoder("utf-8")().decode(first, final=len(first) < FIRST_LINE_LIMIT)  # cut: may end mid-char
    except UnicodeDecodeError as exc:
        raise PipelineError(f"glove.path = {str(path)!r}: its first line is not UTF-8 ({exc.reason} at byte "
                            f"{exc.start}). {fix}") from None


def _check_zip(key: str, path: Path) -> None:
    if not zipfile.is_zipfile(path):
        raise PipelineError(f"{key} = {str(path)!r} is not a zip file. Fix: point {key} at a zip holding a GloVe "
                            "text file (e.g. glove.6B.zip), or use glove=path for a text file.")
