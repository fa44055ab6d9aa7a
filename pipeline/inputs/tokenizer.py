"""Keras-compatible text tokenizer and sequence padding (numpy only).

Reproduces the semantics of ``tf.keras.preprocessing.text.Tokenizer`` and
``tf.keras.preprocessing.sequence.pad_sequences`` without TensorFlow:

* ``word_index`` is 1-based (0 is reserved for padding), ordered by word count
  descending with ties kept in first-occurrence order; the ``oov_token`` (if
  any) is forced to index 1.
* ``word_index`` keeps every word; ``num_words`` only filters the output of
  ``texts_to_sequences`` (indices ``>= num_words`` are dropped, or mapped to the
  OOV index when an ``oov_token`` is set).

Additions over Keras: argument validation with actionable ``ValueError``s,
``pad_sequences_with_mask`` (a length-based mask that stays correct when the
padding value collides with a token id) and ``word_sequence`` (GloVe's own
splits, for real text). Only what the pipeline uses of Keras's API is here.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from typing import Iterable, List, Optional, Sequence, Tuple, Union

import numpy as np

DEFAULT_FILTERS = '!"#$%&()*+,-./:;<=>?@[\\]^_`{|}~\t\n'

Text = Union[str, List[str]]


def text_to_word_sequence(
    text: str,
    filters: str = DEFAULT_FILTERS,
    lower: bool = True,
    split: str = " ",
) -> List[str]:
    """Split ``text`` into words exactly like Keras.

    Lower-cases (if ``lower``), replaces every character of ``filters`` by
    ``split``, splits on ``split`` and drops empty strings.
    """
    if not isinstance(text, str):
        raise ValueError(
            f"`text` must be a str, got {type(text).__name__}; "
            "convert it with str() or pass a list of tokens to the Tokenizer."
        )
    if lower:
        text = text.lower()
    text = text.translate(str.maketrans({c: split for c in filters}))
    return [w for w in text.split(split) if w]


# GloVe 6B's own tokenization (Stanford's PTB tokenizer, lower-cased): a clitic is a token of its own (`do n't`,
# `it 's`, `ca n't`), a quote is none; typographic apostrophes and quotes read as ASCII ones
CLITICS = ("n't", "'s", "'re", "'ve", "'ll", "'d", "'m")
_CLITIC = re.compile(r"(?<=\w)(n't|'s|'re|'ve|'ll|'d|'m)\b", re.IGNORECASE)
_ASCII_QUOTES = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"'})


def word_sequence(text: str, cfg) -> List[str]:
    """The words of `text` as the tokenizer config `cfg` splits it: Keras's ``text_to_word_sequence``, or, with
    ``cfg.glove_splits``, GloVe's: clitics split off first, then Keras's filters, then quotes stripped from the words'
    ends (a lone quote is no word)."""
    if not cfg.glove_splits:
        return text_to_word_sequence(text, cfg.filters, cfg.lower, cfg.split)
    text = _CLITIC.sub(lambda m: cfg.split + m.group(1), text.translate(_ASCII_QUOTES))
    words = text_to_word_sequence(text, cfg.filters, cfg.lower, cfg.split)
    return [w for w in (w if w.lower() in CLITICS else w.strip("'\"") for w in words) if w]


def _is_int(x: object) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


class Tokenizer:
    """Word -> integer index vocabulary with ``tf.keras`` Tokenizer semantics.

    Args:
        num_words: if set, ``texts_to_sequences`` keeps only indices
            ``< num_words`` (i.e. the ``num_words - 1`` most frequent entries).
        filters: characters replaced by ``split`` before splitting.
        lower: lower-case texts before tokenizing.
        split: separator string (non-empty).
        oov_token: if set, gets index 1 and replaces unknown / out-of-range
            words in ``texts_to_sequences``.
    """

    def __init__(
        self,
        num_words: Optional[int] = None,
        filters: str = DEFAULT_FILTERS,
        lower: bool = True,
        split: str = " ",
        oov_token: Optional[str] = None,
    ) -> None:
        if num_words is not None and (not _is_int(num_words) or num_words < 1):
            raise ValueError(
                f"`num_words` must be None (keep all words) or an int >= 1, "
                f"got {num_words!r}; use e.g. num_words=len(word_index) + 1."
            )
        if isinstance(filters, (list, tuple)) and all(isinstance(c, str) and len(c) == 1 for c in filters):
            filters = "".join(filters)
        if not isinstance(filters, str):
            raise ValueError(
                f"`filters` must be a str of characters to strip, got "
                f"{type(filters).__name__}; pass '' to disable filtering."
            )
        if not isinstance(split, str) or split == "":
            raise ValueError(
                f"`split` must be a non-empty str separator, got {split!r}; use split=' ' to split on spaces."
            )
        if not isinstance(lower, (bool, np.bool_)):
            raise ValueError(f"`lower` must be True or False, got {lower!r}.")
        if oov_token is not None and not isinstance(oov_token, str):
            raise ValueError(f"`oov_token` must be None or a str such as '<OOV>', got {oov_token!r}.")
        self.num_words = None if num_words is None else int(num_words)
        self.filters = filters
        self.lower = bool(lower)
        self.split = split
        self.oov_token = oov_token
        self.word_counts: "OrderedDict[str, int]" = OrderedDict()
        self.word_index: dict = {}
        self.index_word: dict = {}
        self._fitted = False

    # ------------------------------------------------------------------ utils
    def _tokenize_all(self, texts: Iterable[Text], arg: str) -> List[List[str]]:
        """Validate ``texts`` and return one token list per document."""
        if isinstance(texts, (str, bytes)):
            raise ValueError(
                f"`{arg}` must be a list of texts, got a single string; wrap it in a list: [{texts[:20]!r}...]."
            )
        try:
            items = list(texts)
        except TypeError:
            raise ValueError(
                f"`{arg}` must be an iterable of str (or of lists of str), got {type(texts).__name__}."
            ) from None
        out: List[List[str]] = []
        for i, text in enumerate(items):
            if isinstance(text, list):
                if not all(isinstance(t, str) for t in text):
                    raise ValueError(
                        f"`{arg}[{i}]` is a list but not all of its tokens are str; convert tokens with str() first."
                    )
                out.append([t.lower() for t in text] if self.lower else list(text))
            elif isinstance(text, str):
                out.append(text_to_word_sequence(text, self.filters, self.lower, self.split))
            else:
                raise ValueError(
                    f"`{arg}[{i}]` must be a str (or a list of str tokens), got "
                    f"{type(text).__name__}; convert it with str() or drop it."
                )
        return out

    # -------------------------------------------------------------------- api
    def fit_on_texts(self, texts: Iterable[Text]) -> "Tokenizer":
        """Update counts and rebuild ``word_index`` from ``texts`` (n_docs,)."""
        for seq in self._tokenize_all(texts, "texts"):
            for w in seq:
                self.word_counts[w] = self.word_counts.get(w, 0) + 1

        wcounts = list(self.word_counts.items())
        wcounts.sort(key=lambda x: x[1], reverse=True)  # stable: ties keep order
        sorted_voc = [] if self.oov_token is None else [self.oov_token]
        sorted_voc.extend(w for w, _ in wcounts)
        # Same construction as Keras (incl. its quirk: if the oov_token also
        # occurs in the texts, the later duplicate index wins).
        self.word_index = dict(zip(sorted_voc, range(1, len(sorted_voc) + 1)))
        self.index_word = {c: w for w, c in self.word_index.items()}
        self._fitted = True
        return self

    def texts_to_sequences(self, texts: Iterable[Text]) -> List[List[int]]:
        """Map each text to a list of word indices (ragged, n_docs lists)."""
        if not self._fitted:
            raise ValueError("Tokenizer has no vocabulary; call fit_on_texts(texts) before texts_to_sequences().")
        num_words = self.num_words
        oov_index = self.word_index.get(self.oov_token)
        result: List[List[int]] = []
        for seq in self._tokenize_all(texts, "texts"):
            vect: List[int] = []
            for w in seq:
                i = self.word_index.get(w)
                if i is not None:
                    if num_words and i >= num_words:
                        if oov_index is not None:
                            vect.append(oov_index)
                    else:
                        vect.append(i)
                elif self.oov_token is not None:
                    vect.append(oov_index)
            result.append(vect)
        return result


def _check_pad_args(padding: str, truncating: str, maxlen: Optional[int]) -> None:
    if padding not in ("pre", "post"):
        raise ValueError(f"`padding` must be 'pre' or 'post', got {padding!r}.")
    if truncating not in ("pre", "post"):
        raise ValueError(f"`truncating` must be 'pre' or 'post', got {truncating!r}.")
    if maxlen is not None and (not _is_int(maxlen) or maxlen < 1):
        raise ValueError(f"`maxlen` must be None (use the longest sequence) or an int >= 1, got {maxlen!r}.")


def pad_sequences(
    sequences: Sequence[Sequence],
    maxlen: Optional[int] = None,
    dtype: Union[str, type, np.dtype] = "int32",
    padding: str = "pre",
    truncating: str = "pre",
    value: Union[int, float, str] = 0.0,
) -> np.ndarray:
    """Pad/truncate ragged sequences to one length, like Keras.

    Args:
        sequences: n sequences (lists / 1-D arrays; items may be arrays of a
            common shape ``S``).
        maxlen: output length; None -> length of the longest sequence.
        dtype: output dtype.
        padding: 'pre' or 'post' -- where the ``value`` fill goes.
        truncating: 'pre' keeps the last ``maxlen`` items, 'post' the first.
        value: fill value.

    Returns:
        Array of shape ``(n, maxlen) + S`` and dtype ``dtype``.

    Longer than 60 lines because it follows Keras's pad_sequences step by step, so that the two can be compared line by
    line.
    """
    _check_pad_args(padding, truncating, maxlen)
    if not hasattr(sequences, "__len__") or isinstance(sequences, (str, bytes)):
        raise ValueError("`sequences` must be a list of sequences (e.g. list of lists of int).")
    lengths = []
    for i, s in enumerate(sequences):
        if not hasattr(s, "__len__") or isinstance(s, (str, bytes)):
            raise ValueError(
                f"`sequences[{i}]` must be a list/array of tokens, got "
                f"{type(s).__name__}: {s!r}; wrap scalars in a list."
            )
        lengths.append(len(s))
    num_samples = len(lengths)
    if maxlen is None:
        maxlen = max(lengths) if lengths else 0

    sample_shape: Tuple[int, ...] = ()
    for s in sequences:
        if len(s):
            sample_shape = np.asarray(s).shape[1:]
            break

    x = np.full((num_samples, maxlen) + tuple(sample_shape), value, dtype=dtype)
    for idx, s in enumerate(sequences):
        if not len(s):
            continue
        trunc = s[-maxlen:] if truncating == "pre" else s[:maxlen]
        trunc = np.asarray(trunc, dtype=dtype)
        if trunc.shape[1:] != sample_shape:
            raise ValueError(
                f"Shape of sample {trunc.shape[1:]} of sequence at position "
                f"{idx} is different from expected shape {sample_shape}."
            )
        if padding == "post":
            x[idx, : len(trunc)] = trunc
        else:
            x[idx, -len(trunc) :] = trunc
    return x


def pad_sequences_with_mask(
    sequences: Sequence[Sequence],
    maxlen: Optional[int] = None,
    padding: str = "pre",
    truncating: str = "pre",
    value: Union[int, float] = 0,
    dtype: Union[str, type, np.dtype] = "int32",
) -> Tuple[np.ndarray, np.ndarray, List[bool]]:
    """``pad_sequences`` plus a length-based mask.

    Returns:
        padded: ``(n, maxlen)`` array (same as ``pad_sequences``).
        mask: ``(n, maxlen)`` bool, True at positions holding a real token
            (computed from lengths, so correct even if ``value`` is a token id).
        truncated: n bools, True where the input sequence was longer than
            ``maxlen`` and got cut.
    """
    padded = pad_sequences(sequences, maxlen=maxlen, dtype=dtype, padding=padding, truncating=truncating, value=value)
    width = padded.shape[1]
    lengths = np.array([len(s) for s in sequences], dtype=np.int64)
    kept = np.minimum(lengths, width)
    pos = np.arange(width)[None, :]
    if padding == "post":
        mask = pos < kept[:, None]
    else:
        mask = pos >= (width - kept)[:, None]
    truncated = [bool(length > width) for length in lengths]
    return padded, mask, truncated
