"""The texts as the seed tokenizes them: Keras Tokenizer + pad_sequences -> word index, sequences, padded ids,
padding mask, and per sentence the positions and ids of its tokens (what data/tokens/tokens.json holds)."""

from __future__ import annotations

import logging

from pipeline.base.errors import PipelineError

log = logging.getLogger("pipeline")


def tokenize(texts: list[str], cfg: dict) -> dict:
    """Keras Tokenizer + pad_sequences as configured; every sentence keeps >= 2 tokens (PCA needs 2 points)."""
    from pipeline.inputs.tokenizer import Tokenizer, pad_sequences_with_mask

    tokenizer = Tokenizer(
        num_words=cfg["num_words"],
        filters=cfg["filters"],
        lower=cfg["lower"],
        split=cfg["split"],
        oov_token=cfg["oov_token"],
    )
    tokenizer.fit_on_texts(texts)
    sequences = tokenizer.texts_to_sequences(texts)
    padded, mask, truncated = pad_sequences_with_mask(
        sequences, maxlen=cfg["maxlen"], padding=cfg["padding"], truncating=cfg["truncating"], value=cfg["value"]
    )
    for i, (text, seq, cut) in enumerate(zip(texts, sequences, truncated)):
        if cut:
            log.warning(
                "sentence %d has %d tokens, more than tokenizer.maxlen=%d: %s %d cut "
                "(tokenizer.truncating=%s). Raise tokenizer.maxlen to keep them.",
                i,
                len(seq),
                cfg["maxlen"],
                "the first" if cfg["truncating"] == "pre" else "the last",
                len(seq) - cfg["maxlen"],
                cfg["truncating"],
            )
        kept = int(mask[i].sum())
        if kept < 2:
            raise PipelineError(
                f"sentence {i} ({text!r}) has {kept} token(s) after tokenization (tokenizer.num_words="
                f"{cfg['num_words']}, filters, maxlen): a 2-D projection needs at least 2. "
                "Fix the text or the tokenizer settings."
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
