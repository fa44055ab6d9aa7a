"""The sentences to study: inline in the config (texts.sentences) or one per line in a file (texts.file).

The config itself (one of the two keys set, sentences non-empty) is checked by pipeline.config's schema;
`read_sentences` is the one parser of texts files, used by the tokenize stage and by the compose-time check
of input files (pipeline.config.check_inputs), so both read a file the same way.
"""
from __future__ import annotations

from pathlib import Path

from pipeline.base.errors import PipelineError
from pipeline.inputs.local_files import user_file

FIX = "Fix: point texts.file at a UTF-8 file with one sentence per line (under data/texts/ so DVC tracks it), " \
      "or choose texts=seed."


def read_sentences(file: str, root: Path) -> list[str]:
    """One sentence per line of the UTF-8 file texts.file (relative to `root`); blank lines and lines starting
    with '#' are skipped.

    Raises PipelineError (naming texts.file, the file and the fix) for a missing file, a directory or other
    non-regular file, bytes that are not UTF-8, or a file without a sentence.
    """
    path = user_file(file, root, "texts.file", FIX)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as exc:
        raise PipelineError(f"texts.file: {path} is not UTF-8 ({exc.reason} at byte {exc.start}). Fix: save it as "
                            "UTF-8, or choose texts=seed.") from None
    sentences = [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]
    if not sentences:
        raise PipelineError(f"texts.file: {path} holds no sentence (only blank lines and '#' comments). {FIX}")
    return sentences


def load_texts(cfg: dict, root: Path) -> list[str]:
    """Sentences from `texts.sentences`, or from the file `texts.file` (see `read_sentences`)."""
    if cfg["file"] is None:
        return list(cfg["sentences"])
    return read_sentences(cfg["file"], root)
