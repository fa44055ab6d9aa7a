"""Figures of the tutorials (seeds 001, 002, 004), from the `tutorials` config group.

    tutorial001_random_embedding.png   "Random Embedding": PositionEmbedding output of the two phrases
    tutorial001_fixed_embedding.png    "Fixed Weight Embedding": FixedPositionEmbedding output of the same
    tutorial002_embedding_plus_pe.png  random embedding matrix + sinusoidal PE of 002's sentence
    tutorial004_padding_mask.png       padding mask of the configured texts, as the tokenizer pads them
    tutorial004_look_ahead_mask.png    look-ahead mask, and look-ahead OR padding for sentence 1
    tutorial004_pe_columns.png         PE columns 6-9 over positions (d2l plot, d=32, 60 steps)
    tutorial004_pe_heatmap.png         50 positions of a 128-d encoding

The examples' data is computed with torch (the tutorials' layers) by `queue_tutorial_figures` (the encode stage), in
the calling process; the masks of the configured texts are the figures stage's (`queue_mask_figures`, from the
tokenize stage's output, numpy only: the tutorial's masks as pipeline.tutorials.masks builds them, which
tests/test_tutorial_figures.py checks). Every figure is drawn from plain arrays, so that forked figure workers draw
them without torch.
"""

from __future__ import annotations

from typing import Any, Callable


from pathlib import Path

import numpy as np


PAD_LABEL = "<pad>"


# ---------------------------------------------------------------- data


def signature_embeddings(cfg: Any) -> dict:
    """Tutorial 001's setup: vectorize the phrases, run both position-embedding layers.

    Returns vocabulary (list), ids (n, L) int64, words (n lists of L labels), random and fixed
    (n, L, D) float32 numpy arrays, with L = sequence_length and D = output_dim.
    """
    import torch

    from pipeline.tutorials.position_modules import FixedPositionEmbedding, PositionEmbedding
    from pipeline.tutorials.text_vectorization import TextVectorization

    sig = cfg.signature
    vectorizer = TextVectorization(max_tokens=sig.vocab_size, output_sequence_length=sig.sequence_length)
    vectorizer.adapt(sig.phrases)
    ids = vectorizer(sig.phrases)
    vocabulary = vectorizer.get_vocabulary()
    inputs = torch.as_tensor(ids)
    random_layer = PositionEmbedding(
        sig.sequence_length,
        sig.vocab_size,
        sig.output_dim,
        seed=cfg.seed,
        init=sig.init,
        scale=sig.scale,
    )
    fixed_layer = FixedPositionEmbedding(sig.sequence_length, sig.vocab_size, sig.output_dim, base=float(sig.base))
    with torch.no_grad():
        random, fixed = random_layer(inputs).numpy(), fixed_layer(inputs).numpy()
    words = [[vocabulary[t] if t else PAD_LABEL for t in row] for row in ids]
    return {"vocabulary": vocabulary, "ids": ids, "words": words, "random": random, "fixed": fixed}


def mask_inputs(params: Any, tokens: dict) -> dict:
    """Padded ids (n, maxlen), padding mask (n, maxlen, True = padding) and per-position words of `tokens`, the
    tokenize stage's output (data/tokens/tokens.json)."""
    padded = np.asarray(tokens["padded"], dtype=np.int64)
    keep = np.asarray(tokens["mask"], dtype=bool)
    index_word = {int(i): w for w, i in tokens["word_index"].items()}
    words = [
        [index_word.get(int(t), "?") if k else PAD_LABEL for t, k in zip(row, krow)] for row, krow in zip(padded, keep)
    ]
    return {"texts": tokens["texts"], "padded": padded, "padding": ~keep, "words": words}


# ---------------------------------------------------------------- figures


def _binary_image(ax, fig, matrix: np.ndarray):
    """Draw a boolean matrix (True = masked) with a two-entry colorbar naming both forms."""
    from matplotlib.colors import ListedColormap

    image = ax.imshow(
        matrix.astype(float),
        cmap=ListedColormap(["#d9ecd0", "#c0392b"]),
        vmin=0,
        vmax=1,
        interpolation="nearest",
        aspect="auto",
    )
    bar = fig.colorbar(image, ax=ax, ticks=[0.25, 0.75], shrink=0.8)
    bar.ax.set_yticklabels(["attend\n(False, +0)", "masked\n(True, -1e9)"])
    return image


def _signature_figure(
    emb: np.ndarray, words: list[list[str]], titles: list[str], suptitle: str, path: Path, dpi: int, cmaps: dict
) -> None:
    import matplotlib.pyplot as plt

    from pipeline.figures.drawing import clip_label, colour_scale, integer_ticks, save

    n, length, dim = emb.shape
    fig, axes = plt.subplots(1, n, figsize=(7.5 * n, 6.2), squeeze=False, layout="constrained")
    for i, ax in enumerate(axes[0]):
        image = ax.imshow(emb[i], interpolation="nearest", aspect="auto", **colour_scale(emb[i], **cmaps))
        fig.colorbar(image, ax=ax, label="word embedding + position embedding")
        ax.set_yticks(range(length), [f"{p}: {clip_label(w)}" for p, w in enumerate(words[i])], fontsize=7)
        ax.set(title=titles[i], xlabel=f"output dimension (0..{dim - 1})", ylabel="position: word")
        integer_ticks(ax.xaxis)
    fig.suptitle(suptitle)
    save(fig, path, dpi)


def _padding_figure(mask: np.ndarray, words: list[list[str]], full: int, total: int, path: Path, dpi: int) -> None:
    """mask (n, length): the first `length` of `full` positions of the first n of `total` sentences (True: padding),
    each cell naming its word (words: n lists of length)."""
    import matplotlib.pyplot as plt

    from pipeline.figures.drawing import clip_label, save
    from pipeline.figures.labels import wrap

    n, length = mask.shape
    fig, ax = plt.subplots(figsize=(min(20.0, max(8.0, 0.7 * length + 2)), 2.4 + 0.75 * n), layout="constrained")
    _binary_image(ax, fig, mask)
    for s in range(n):
        for p in range(length):
            ax.text(p, s, clip_label(words[s][p], 9), ha="center", va="center", fontsize=7, rotation=90)
    ax.set_xticks(range(length))
    ax.set_yticks(range(n), [f"sentence {s}" for s in range(n)])
    ax.set(
        xlabel="position in the padded sequence (key)",
        ylabel="sentence",
        title=wrap(
            f"Padding mask (batch, seq): True where the tokenizer padded; first {length} of {full} "
            f"positions{f' of the first {n} of {total} sentences' if n < total else ''}. "
            "Attention form: (batch, 1, 1, seq); additive form: -1e9 where True",
            90,
        ),
    )
    save(fig, path, dpi)


def _look_ahead_figure(ahead: np.ndarray, both: np.ndarray, words: list[str], path: Path, dpi: int) -> None:
    """ahead, both (L, L): the look-ahead mask and look-ahead OR padding of the first sentence (words: its L)."""
    import matplotlib.pyplot as plt

    from pipeline.figures.drawing import clip_label, save

    length = len(words)
    labels = [f"{p}: {clip_label(w)}" for p, w in enumerate(words)]
    fig, axes = plt.subplots(
        1, 2, figsize=(2 * max(6.0, 0.45 * length + 3), max(5.5, 0.4 * length + 2)), layout="constrained"
    )
    for ax, matrix, title in (
        (axes[0], ahead, f"Look-ahead mask ({length}, {length}): True above the diagonal"),
        (axes[1], both, "Look-ahead OR padding, sentence 1 (decoder self-attention)"),
    ):
        _binary_image(ax, fig, matrix)
        ax.set_xticks(range(length), labels, rotation=90, fontsize=7)
        ax.set_yticks(range(length), labels, fontsize=7)
        ax.set(title=title, xlabel="key position j (may not be seen by query i when True)", ylabel="query position i")
    save(fig, path, dpi)


def _pe_columns_figure(pe: np.ndarray, columns: list[int], path: Path, dpi: int) -> None:
    """pe (steps, dim): the sinusoidal table whose `columns` are drawn over the positions."""
    import matplotlib.pyplot as plt

    from pipeline.figures.drawing import integer_ticks, save

    steps, dim = pe.shape
    fig, ax = plt.subplots(figsize=(10, 4), layout="constrained")
    integer_ticks(ax.xaxis)
    for c in columns:
        kind = "sin" if c % 2 == 0 else "cos"
        ax.plot(np.arange(steps), pe[:, c], marker=".", markersize=3, label=f"Col {c} ({kind}, i={c // 2})")
    ax.set(
        title=f"Positional encoding columns over positions (d={dim}, {steps} positions, base 10000)\n"
        "each sin/cos pair turns at its own frequency 1 / 10000^(2i/d)",
        xlabel="Row (position)",
        ylabel="PE(position, column)",
    )
    ax.grid(True, alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    save(fig, path, dpi)


def _random_embedding_figure(example: dict, path: Path, dpi: int, cmaps: dict) -> None:
    """Three heatmaps; each panel's colours follow its own data: uniform [0, 1) draws and their sum with the PE get
    the sequential map, the PE alone (centred at 0) the diverging one."""
    import matplotlib.pyplot as plt

    from pipeline.figures.drawing import clip_label, colour_scale, integer_ticks, save, short_text

    tokens = example["tokens"]
    n, dim = example["output"].shape
    rows = min(n, 20)  # a long sentence: its first 20 positions
    fig, axes = plt.subplots(3, 1, figsize=(12, min(16.0, 2.2 + 1.5 * rows)), sharex=True, layout="constrained")
    panels = (
        ("input_embeddings", "random embedding matrix[ids] (np.random.rand, uniform [0, 1))"),
        ("pe", "sinusoidal positional encoding PE(pos)"),
        ("output", "input embeddings with positional encoding (sum)"),
    )
    for ax, (key, title) in zip(axes, panels):
        values = example[key][:rows]
        image = ax.imshow(values, aspect="auto", interpolation="nearest", **colour_scale(values, **cmaps))
        fig.colorbar(image, ax=ax, label="value")
        ax.set_yticks(range(rows), [f"{p}: {clip_label(w)}" for p, w in enumerate(tokens[:rows])], fontsize=8)
        ax.set(title=title, ylabel="position: word")
    integer_ticks(axes[-1].xaxis)
    axes[-1].set_xlabel(f"embedding dimension (0..{dim - 1})")
    fig.suptitle(f"Tutorial 002: {short_text(tokens)}, d={dim}")
    save(fig, path, dpi)


def queue_tutorial_figures(params: Any, path: Callable[[str], Path], batch: Any) -> None:
    """Compute the tutorials' examples here (torch) and queue their five figures on `batch`
    (pipeline.figures.batch.Batch), the longest to draw first; path(name): where a figure goes (and records its
    name)."""
    from pipeline.core.encoding import sinusoidal_encoding
    from pipeline.figures.drawing import heatmap
    from pipeline.tutorials.position_modules import random_embedding_with_pe

    cfg = params.tutorials  # validated by pipeline.config's schema
    figures = params.figures
    dpi, max_size = figures.dpi, figures.max_heatmap_size
    cmaps = {"diverging": figures.cmap, "sequential": figures.sequential_cmap}

    sig = cfg.signature
    data = signature_embeddings(cfg)
    shape = f"sequence length {sig.sequence_length}, output dim {sig.output_dim}, vocabulary {sig.vocab_size}"
    rnd = cfg.random_embedding
    example = random_embedding_with_pe(rnd.sentence, rnd.embed_dim, seed=cfg.seed)
    columns, heat = cfg.pe_columns, cfg.pe_heatmap

    batch.add(_random_embedding_figure, example, path("tutorial002_embedding_plus_pe.png"), dpi, cmaps)
    for table, title, name in (
        (
            "random",
            f"Random Embedding (trainable tables, {sig.init} init, scale {sig.scale:g}, seed {cfg.seed}; {shape})",
            "tutorial001_random_embedding.png",
        ),
        (
            "fixed",
            f"Fixed Weight Embedding from Attention is All You Need (sinusoidal tables; {shape})",
            "tutorial001_fixed_embedding.png",
        ),
    ):
        batch.add(_signature_figure, data[table], data["words"], sig.titles, title, path(name), dpi, cmaps)
    batch.add(
        heatmap,
        sinusoidal_encoding(heat.positions, heat.dim).numpy(),
        path("tutorial004_pe_heatmap.png"),
        title=f"{heat.positions} positional encodings of dimension {heat.dim} (base 10000)\n"
        "the higher the column, the slower it changes with position",
        xlabel="encoding dimension i (even: sin, odd: cos)",
        ylabel="position",
        cbar="PE value",
        dpi=dpi,
        max_size=max_size,
        cmap=cmaps["diverging"],
        sequential=cmaps["sequential"],
    )
    batch.add(
        _pe_columns_figure,
        sinusoidal_encoding(columns.num_steps, columns.encoding_dim).numpy(),
        list(columns.columns),
        path("tutorial004_pe_columns.png"),
        dpi,
    )


def mask_figure_data(params: Any, tokens: dict) -> dict:
    """Tutorial 004's masks of the first sentences as the tokenizer pads them (`tokens`: the tokenize stage's
    output), the first tutorials.masks.display_len positions: look_ahead (L, L), both (L, L: look-ahead OR the first
    sentence's padding), padding (rows, L) of the first figures.max_sentences sentences, their words, and the padded
    shape. Boolean, True = masked, as pipeline.tutorials.masks builds them (look_ahead_mask, combined_mask)."""
    masks = mask_inputs(params, tokens=tokens)
    length = min(params.tutorials.masks.display_len, masks["padded"].shape[1])
    rows = params.figures.max_sentences
    ahead = np.triu(np.ones((length, length), dtype=bool), k=1)
    return {
        "look_ahead": ahead,
        "both": ahead | masks["padding"][0, :length][None, :],
        "padding": masks["padding"][:rows, :length],
        "words": [words[:length] for words in masks["words"][:rows]],
        "shape": masks["padding"].shape,
    }


def queue_mask_figures(params: Any, tokens: dict, path: Callable[[str], Path], batch: Any) -> None:
    """Queue tutorial 004's two mask figures of the configured texts on `batch` (the figures stage)."""
    data, dpi = mask_figure_data(params, tokens), params.figures.dpi
    words = data["words"][0][: data["look_ahead"].shape[0]]
    batch.add(_look_ahead_figure, data["look_ahead"], data["both"], words, path("tutorial004_look_ahead_mask.png"), dpi)
    batch.add(
        _padding_figure,
        data["padding"],
        data["words"],
        *data["shape"][::-1],
        path("tutorial004_padding_mask.png"),
        dpi,
    )
