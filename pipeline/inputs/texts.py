"""The sentences to study: inline in the config (texts.sentences) or one per line in a file (texts.file).

The config itself (one of the two keys set, sentences non-empty) is checked by pipeline.config's schema;
`read_sentences` is the one parser of texts files, used by the tokenize stage and by the compose-time check
of input files (pipeline.config.check_inputs), so both read a file the same way.
"""

from __future__ import annotations

from typing import Any


from pathlib import Path

from pipeline.base.errors import PipelineError
from pipeline.inputs.local_files import user_file


FIX = (
    "Fix: point texts.file at a UTF-8 file with one sentence per line (under data/texts/ so DVC tracks it), "
    "or choose texts=seed."
)


# What str.splitlines() would also split on, besides "\n" and "\r\n": inside a line of a texts file these
# separate words, not sentences (a line is one sentence, as any editor shows it), so they become spaces.
INLINE_BREAKS = dict.fromkeys(map(ord, "\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"), " ")


def split_lines(text: str) -> list[str]:
    """Lines of a text file: split on "\n" only ("\r\n" too), never on the other characters str.splitlines() takes
    for line ends (\\r alone, \\v, \\f, \\x1c-\\x1e, U+0085, U+2028, U+2029), which become spaces."""
    return [line.translate(INLINE_BREAKS) for line in text.split("\n")]


def read_sentences(file: str, root: Path) -> list[str]:
    """One sentence per line of the UTF-8 file texts.file (relative to `root`); blank lines and lines starting
    with '#' are skipped. Lines end at "\n" (or "\r\n") only: Unicode line and paragraph separators, vertical tab,
    form feed and a lone "\r" inside a line are spaces between words (see `split_lines`).

    Raises PipelineError (naming texts.file, the file and the fix) for a missing file, a directory or other
    non-regular file, bytes that are not UTF-8, or a file without a sentence.
    """
    path = user_file(file, root, "texts.file", FIX)
    try:
        lines = split_lines(path.read_bytes().decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise PipelineError(
            f"texts.file: {path} is not UTF-8 ({exc.reason} at byte {exc.start}). Fix: save it as "
            "UTF-8, or choose texts=seed."
        ) from None
    sentences = [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]
    if not sentences:
        raise PipelineError(f"texts.file: {path} holds no sentence (only blank lines and '#' comments). {FIX}")
    return sentences


def load_texts(cfg: Any, root: Path) -> list[str]:
    """Sentences from `texts.sentences`, or from the file `texts.file` (see `read_sentences`)."""
    if cfg.file is None:
        return list(cfg.sentences)
    return read_sentences(cfg.file, root)
