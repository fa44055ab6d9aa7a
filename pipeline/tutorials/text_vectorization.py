"""Keras `TextVectorization` (output_mode='int') without TensorFlow: the vocabulary of tutorial 001.

Reproduces `tf.keras.layers.TextVectorization(max_tokens, standardize, split='whitespace',
output_sequence_length)` with `adapt` and `__call__` exactly as Keras 2.x/3.x does it:

* standardize 'lower_and_strip_punctuation': `tf.strings.lower` (ASCII letters only: its default
  encoding '' calls absl::AsciiStrToLower, so 'É' stays 'É'), then the regex
  STRIP_PUNCTUATION_REGEX is replaced by '' (deleted, not replaced by a space: "don't" -> "dont",
  "a,b" -> "ab"); other Unicode punctuation ('’', '—', '«') stays.
* split 'whitespace': `tf.strings.split` with no separator, which splits on runs of the six ASCII
  whitespace bytes (space, \\t, \\n, \\v, \\f, \\r) only; a no-break space U+00A0 does not split.
* vocabulary (IndexLookup.finalize_state): '' (mask, id 0) and '[UNK]' (OOV, id 1) first, then the
  tokens sorted by count descending, ties broken by the token itself in *descending* UTF-8 byte
  order (`np.lexsort((tokens, counts))[::-1]`; for Python str this is descending code-point
  order). `max_tokens` counts both reserved entries: at most max_tokens - 2 tokens are learned.
* call: unknown tokens -> 1; `output_sequence_length` pads with 0 and truncates at the end;
  None pads to the longest sentence of the call.

Tutorial 001: texts "I am a robot" / "you too robot", max_tokens=10, output_sequence_length=5
-> vocabulary ['', '[UNK]', 'robot', 'you', 'too', 'i', 'am', 'a'], ids [[5 6 7 2 0] [3 4 2 0 0]].
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Iterable

import numpy as np

from pipeline.base.errors import PipelineError

MASK_TOKEN = ""
OOV_TOKEN = "[UNK]"
# keras.layers.TextVectorization's DEFAULT_STRIP_REGEX, character for character (`,-\.` is the
# range ',' .. '.', so '-' is in it; so is the single quote).
STRIP_PUNCTUATION_REGEX = r'[!"#$%&()\*\+,-\./:;<=>?@\[\\\]^_`{|}~\']'
STANDARDIZE_MODES = (None, "lower", "strip_punctuation", "lower_and_strip_punctuation")
ASCII_WHITESPACE = " \t\n\v\f\r"

_STRIP = re.compile(STRIP_PUNCTUATION_REGEX)
_SPLIT = re.compile(f"[{re.escape(ASCII_WHITESPACE)}]+")
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def standardize(text: str, mode: str | None = "lower_and_strip_punctuation") -> str:
    """One text standardized as Keras does it (ASCII-only lower-casing, punctuation deleted)."""
    if mode not in STANDARDIZE_MODES:
        raise PipelineError(f"standardize={mode!r} is not supported: use one of {STANDARDIZE_MODES}.")
    if mode in ("lower", "lower_and_strip_punctuation"):
        text = text.translate(_ASCII_LOWER)
    if mode in ("strip_punctuation", "lower_and_strip_punctuation"):
        text = _STRIP.sub("", text)
    return text


def split_whitespace(text: str) -> list[str]:
    """Split on runs of ASCII whitespace; no empty tokens (tf.strings.split with sep=None)."""
    return [token for token in _SPLIT.split(text) if token]


def _check_texts(texts: Iterable[str], what: str) -> list[str]:
    if isinstance(texts, (str, bytes)):
        raise PipelineError(f"{what} takes a list of texts, got one string: wrap it in a list, [{texts[:30]!r}].")
    texts = list(texts)
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise PipelineError(f"{what}: text {i} is a {type(text).__name__}, not a str: pass strings.")
    return texts


class TextVectorization:
    """Word -> id vocabulary with Keras TextVectorization(output_mode='int') semantics.

    Args:
        max_tokens: vocabulary size including '' and '[UNK]' (None: no limit; Keras needs > 1).
        standardize: None, 'lower', 'strip_punctuation' or 'lower_and_strip_punctuation'.
        split: 'whitespace' (the only split supported).
        output_sequence_length: ids per text after padding/truncation at the end (None: longest).
    """

    def __init__(
        self,
        max_tokens: int | None = None,
        standardize: str | None = "lower_and_strip_punctuation",
        split: str = "whitespace",
        output_sequence_length: int | None = None,
    ) -> None:
        if max_tokens is not None and (not _is_int(max_tokens) or max_tokens <= 1):
            raise PipelineError(
                f"max_tokens={max_tokens!r}: it must be None or an integer > 1 (it counts the "
                "reserved '' and '[UNK]' entries), e.g. max_tokens=200."
            )
        if standardize not in STANDARDIZE_MODES:
            raise PipelineError(f"standardize={standardize!r} is not supported: use one of {STANDARDIZE_MODES}.")
        if split != "whitespace":
            raise PipelineError(f"split={split!r} is not supported: use split='whitespace'.")
        if output_sequence_length is not None and (not _is_int(output_sequence_length) or output_sequence_length < 1):
            raise PipelineError(
                f"output_sequence_length={output_sequence_length!r}: it must be None or an integer >= 1, e.g. 20."
            )
        self.max_tokens = max_tokens
        self.standardize = standardize
        self.split = split
        self.output_sequence_length = output_sequence_length
        self.token_counts: Counter[str] = Counter()
        self._vocabulary: list[str] | None = None
        self._index: dict[str, int] = {}

    def tokenize(self, text: str) -> list[str]:
        """Standardize then split one text: the tokens the vocabulary sees."""
        return split_whitespace(standardize(text, self.standardize))

    def adapt(self, texts: Iterable[str]) -> "TextVectorization":
        """Learn the vocabulary from `texts` (n,); replaces any earlier vocabulary, as Keras's adapt does."""
        texts = _check_texts(texts, "TextVectorization.adapt")
        counts: Counter[str] = Counter()
        for text in texts:
            counts.update(self.tokenize(text))
        counts.pop(MASK_TOKEN, None)
        counts.pop(OOV_TOKEN, None)  # only reachable with standardize=None: brackets are punctuation
        # Keras: np.lexsort((tokens, counts))[::-1] -> count descending, then token descending.
        ordered = sorted(counts, key=lambda token: (counts[token], token.encode("utf-8")), reverse=True)
        if self.max_tokens is not None:
            ordered = ordered[: self.max_tokens - 2]
        self.token_counts = counts
        self._vocabulary = [MASK_TOKEN, OOV_TOKEN, *ordered]
        self._index = {token: i for i, token in enumerate(self._vocabulary)}
        return self

    def get_vocabulary(self) -> list[str]:
        """['', '[UNK]', tokens...]: position = id."""
        if self._vocabulary is None:
            raise PipelineError("TextVectorization has no vocabulary yet: call adapt(texts) first.")
        return list(self._vocabulary)

    def sequences(self, texts: Iterable[str]) -> list[list[int]]:
        """Unpadded ids per text (ragged): unknown tokens -> 1."""
        self.get_vocabulary()
        texts = _check_texts(texts, "TextVectorization")
        return [[self._index.get(token, 1) for token in self.tokenize(text)] for text in texts]

    def __call__(self, texts: Iterable[str]) -> np.ndarray:
        """(n, L) int64 ids, padded with 0 / truncated at the end; L = output_sequence_length or the longest."""
        rows = self.sequences(texts)
        length = self.output_sequence_length
        if length is None:
            length = max((len(row) for row in rows), default=0)
        out = np.zeros((len(rows), length), dtype=np.int64)
        for i, row in enumerate(rows):
            kept = row[:length]
            out[i, : len(kept)] = kept
        return out


def _is_int(value: object) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))
