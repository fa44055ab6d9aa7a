"""The texts as the seed tokenizes them: Keras Tokenizer + pad_sequences -> word index, sequences, padded ids,
padding mask, and per sentence the positions and ids of its tokens (what data/tokens/tokens.json holds)."""

from __future__ import annotations

from typing import Any


import logging

from pipeline.base.errors import PipelineError


log = logging.getLogger("pipeline")


def tokenize(texts: list[str], cfg: Any) -> dict:
    """Keras Tokenizer + pad_sequences as configured; every sentence keeps >= 2 tokens (PCA needs 2 points)."""
    from pipeline.inputs.tokenizer import Tokenizer, pad_sequences_with_mask, word_sequence

    tokenizer = Tokenizer(
        num_words=cfg.num_words,
        filters=cfg.filters,
        lower=cfg.lower,
        split=cfg.split,
        oov_token=cfg.oov_token,
    )
    words = [word_sequence(text, cfg) for text in texts]
    tokenizer.fit_on_texts(words)  # lists of words: Keras's rules, applied to the words split as configured
    sequences = tokenizer.texts_to_sequences(words)
    padded, mask, truncated = pad_sequences_with_mask(
        sequences, maxlen=cfg.maxlen, padding=cfg.padding, truncating=cfg.truncating, value=cfg.value
    )
    dropped = _dropped_by_num_words(words, tokenizer.word_index, cfg.num_words)
    vocabulary = len(tokenizer.word_index)
    _check_enough_tokens(texts, words, dropped, mask.sum(axis=1), cfg, vocabulary)
    _warn_dropped(
        dropped, [len(seq) - cfg.maxlen if cut else 0 for seq, cut in zip(sequences, truncated)], cfg, vocabulary
    )
    positions = [[int(p) for p in row.nonzero()[0]] for row in mask]
    ids = [[int(padded[i][p]) for p in pos] for i, pos in enumerate(positions)]
    return {
        "texts": texts,
        "word_index": tokenizer.word_index,
        "sequences": sequences,
        "padded": padded.tolist(),
        "mask": mask.astype(int).tolist(),
        "truncated": truncated,
        "positions": positions,  # per sentence: padded positions that hold a token
        "ids": ids,  # per sentence: the token ids at those positions
        "words": [[tokenizer.index_word.get(t, tokenizer.oov_token or "?") for t in row] for row in ids],
    }


def _dropped_by_num_words(words: list[list[str]], word_index: dict[str, int], num_words: int | None) -> list[int]:
    """Per sentence: how many of its words tokenizer.num_words leaves out (index >= num_words: dropped, or the
    oov_token in their place)."""
    if not num_words:
        return [0] * len(words)
    return [sum(word_index[w] >= num_words for w in sentence) for sentence in words]


def _short(text: str, limit: int = 80) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "...")


def _check_enough_tokens(texts, words, dropped, kept, cfg: Any, vocabulary: int) -> None:
    """Every sentence keeps >= 2 tokens; otherwise one error for the first such sentence naming the key to change."""
    short = [i for i, n in enumerate(kept) if n < 2]
    if not short:
        return
    i = short[0]
    more = f" (and {len(short) - 1} more sentence(s))" if len(short) > 1 else ""
    if dropped[i] and len(words[i]) - dropped[i] < 2:
        fix = (
            f"tokenizer.num_words={cfg.num_words} keeps only the {cfg.num_words - 1} most frequent words and "
            f"{dropped[i]} of its {len(words[i])} words are not among them: raise tokenizer.num_words "
            f"(tokenizer.num_words={vocabulary + 1} keeps all {vocabulary} words of the texts)"
        )
    elif len(words[i]) < 2:
        fix = (
            f"it has {len(words[i])} word(s) after tokenizer.filters: give it at least 2 words (or change the filters)"
        )
    else:
        fix = f"raise tokenizer.maxlen (now {cfg.maxlen})"
    raise PipelineError(
        f"sentence {i} ({_short(texts[i])}) has {int(kept[i])} token(s) after tokenization{more}; a 2-D projection "
        f"needs at least 2. Fix: {fix}."
    )


def _warn_dropped(dropped: list[int], cut: list[int], cfg: Any, vocabulary: int) -> None:
    """One warning for all the sentences that lose words: how many words in how many sentences, and the key to
    raise."""
    parts = []
    if any(dropped):
        action = "mapped to tokenizer.oov_token" if cfg.oov_token is not None else "dropped"
        parts.append(
            f"{sum(dropped)} word(s) in {sum(n > 0 for n in dropped)} of {len(dropped)} sentences {action}: "
            f"tokenizer.num_words={cfg.num_words} keeps the {cfg.num_words - 1} most frequent words "
            f"(raise tokenizer.num_words to keep them; {vocabulary + 1} keeps all {vocabulary})"
        )
    if any(cut):
        ends = "the last" if cfg.truncating == "pre" else "the first"
        parts.append(
            f"tokenizer.maxlen={cfg.maxlen} keeps {ends} {cfg.maxlen} tokens: {sum(cut)} cut in "
            f"{sum(n > 0 for n in cut)} of {len(cut)} sentences, the longest by {max(cut)} "
            f"(tokenizer.truncating={cfg.truncating}; raise tokenizer.maxlen to keep them)"
        )
    if parts:
        log.warning("tokenize: %s.", "; ".join(parts))
