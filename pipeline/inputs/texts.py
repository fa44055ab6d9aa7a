"""The sentences to study: inline in the config (texts.sentences) or one per line in a file (texts.file).

The config itself (one of the two keys set, sentences non-empty) is checked by pipeline.config's schema;
`read_sentences` is the one parser of texts files, used by the tokenize stage and by the compose-time check
of input files (pipeline.config.check_inputs), so both read a file the same way.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from pipeline.base.errors import PipelineError
from pipeline.inputs.input_files import user_file


def _fix(key: str) -> str:
    other = "choose texts=seed" if key == "texts.file" else f"set {key}=null"
    return (
        f"Fix: point {key} at a UTF-8 file with one sentence per line (under data/texts/ so DVC tracks it), or {other}."
    )


BOM = b"\xef\xbb\xbf"

# What str.splitlines() would also split on, besides "\n" and "\r\n": inside a line of a texts file these
# separate words, not sentences (a line is one sentence, as any editor shows it), so they become spaces.
INLINE_BREAKS = dict.fromkeys(map(ord, "\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"), " ")


def split_lines(text: str) -> list[str]:
    """Lines of a text file: split on "\n" only ("\r\n" too), never on the other characters str.splitlines() takes
    for line ends (\\r alone, \\v, \\f, \\x1c-\\x1e, U+0085, U+2028, U+2029), which become spaces."""
    return [line.translate(INLINE_BREAKS) for line in text.split("\n")]


def read_sentences(file: str, root: Path, key: str = "texts.file") -> list[str]:
    """One sentence per line of the UTF-8 file `file` (relative to `root`; the config key `key` names it); blank
    lines and lines starting with '#' are skipped. Lines end at "\n" (or "\r\n") only: Unicode line and paragraph
    separators, vertical tab, form feed and a lone "\r" inside a line are spaces between words (see `split_lines`).

    A UTF-8 byte-order mark at the start is dropped, with a warning. Raises PipelineError (naming `key`, the
    file and the fix; never quoting the file) for a file outside the project's data (pipeline.inputs.input_files),
    a missing file, a directory or other non-regular file, bytes that are not UTF-8, or a file without a sentence.
    """
    path = user_file(file, root, key, _fix(key))
    data = path.read_bytes()
    if data.startswith(BOM):  # Windows editors' "UTF-8 with BOM": U+FEFF would be part of the first word
        data = data[len(BOM) :]
        logging.getLogger("pipeline").warning(
            "%s: %s starts with a UTF-8 byte-order mark (U+FEFF, bytes EF BB BF): ignored; save the file as plain "
            "UTF-8 to drop this warning",
            key,
            path,
        )
    try:
        lines = split_lines(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise PipelineError(f"{key}: {path} is not UTF-8 ({exc.reason} at byte {exc.start}). {_fix(key)}") from None
    sentences = [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]
    if not sentences:
        raise PipelineError(f"{key}: {path} holds no sentence (only blank lines and '#' comments). {_fix(key)}")
    return sentences


def load_texts(cfg: Any, root: Path) -> list[str]:
    """Sentences from `texts.sentences`, or from the file `texts.file` (see `read_sentences`)."""
    if cfg.file is None:
        return list(cfg.sentences)
    return read_sentences(cfg.file, root)
