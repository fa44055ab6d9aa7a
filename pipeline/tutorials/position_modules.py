"""Position-embedding layers of tutorial 001 as torch modules, and the seeded tables behind them.

* `PositionEmbedding`: trainable word table (vocab_size, d) + trainable position table
  (sequence_length, d), randomly initialised from a seed (Keras's Embedding default is
  uniform(-0.05, 0.05)). Tutorial 001's `PositionEmbeddingLayer`.
* `FixedPositionEmbedding`: both tables fixed to the sinusoidal encoding (word id k gets PE(k)),
  not trainable. Tutorial 001's `PositionEmbeddingFixedWeights`.
* `random_embedding_with_pe`: tutorial 002's example (np.random.rand embedding + sinusoidal PE).

Both modules map int ids (batch, seq) to word_emb[ids] + pos_emb[0..seq-1]: (batch, seq, d).
Random tables are drawn on the CPU from a `torch.Generator` in float32, then moved and cast, so
the same seed gives the same values on every device and dtype.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from pipeline.core.encoding import sinusoidal_encoding
from pipeline.base.errors import PipelineError
from pipeline.core.random_tables import _is_int, check_init, learned_position_table, random_table  # noqa: F401 (re-exported)


def _check_ids(inputs: torch.Tensor, vocab_size: int, sequence_length: int) -> None:
    if (
        not isinstance(inputs, torch.Tensor)
        or inputs.dtype.is_floating_point
        or inputs.dtype == torch.bool
        or inputs.dim() != 2
    ):
        got = (
            f"{inputs.dtype} tensor of shape {tuple(inputs.shape)}"
            if isinstance(inputs, torch.Tensor)
            else type(inputs).__name__
        )
        raise PipelineError(
            f"position embedding input must be an integer tensor (batch, seq) of token ids, got a "
            f"{got}: pass e.g. torch.as_tensor(TextVectorization(...)(texts))."
        )
    if inputs.shape[1] > sequence_length:
        raise PipelineError(
            f"sequence of {inputs.shape[1]} ids is longer than sequence_length={sequence_length}: "
            "truncate it (output_sequence_length) or build the layer with a larger sequence_length."
        )
    if inputs.numel() and (int(inputs.min()) < 0 or int(inputs.max()) >= vocab_size):
        raise PipelineError(
            f"token ids must lie in [0, {vocab_size}), got {int(inputs.min())}..{int(inputs.max())}: "
            f"build the vocabulary with max_tokens <= vocab_size={vocab_size}."
        )


class _SumOfEmbeddings(nn.Module):
    word_embedding: nn.Embedding
    position_embedding: nn.Embedding

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        """ids (batch, seq) -> word_emb[ids] + pos_emb[0..seq-1]: (batch, seq, output_dim)."""
        _check_ids(inputs, self.word_embedding.num_embeddings, self.position_embedding.num_embeddings)
        positions = torch.arange(inputs.shape[1], device=inputs.device)
        return self.word_embedding(inputs) + self.position_embedding(positions)[None, :, :]


class PositionEmbedding(_SumOfEmbeddings):
    """Trainable word (vocab_size, d) and position (sequence_length, d) tables, seeded.

    One generator seeded with `seed` draws the position table first (so it equals
    `learned_position_table(sequence_length, output_dim, seed, init, scale)`), then the word table.
    """

    def __init__(
        self,
        sequence_length: int,
        vocab_size: int,
        output_dim: int,
        seed: int = 0,
        init: str = "uniform",
        scale: float = 0.05,
    ) -> None:
        super().__init__()
        check_init(seed, init, scale)
        self.word_embedding = nn.Embedding(vocab_size, output_dim)
        self.position_embedding = nn.Embedding(sequence_length, output_dim)
        generator = torch.Generator().manual_seed(int(seed))
        with torch.no_grad():
            self.position_embedding.weight.copy_(random_table(sequence_length, output_dim, generator, init, scale))
            self.word_embedding.weight.copy_(random_table(vocab_size, output_dim, generator, init, scale))


class FixedPositionEmbedding(_SumOfEmbeddings):
    """Fixed (not trainable) tables: word id k -> PE(k) (vocab_size rows), position p -> PE(p)."""

    def __init__(
        self,
        sequence_length: int,
        vocab_size: int,
        output_dim: int,
        base: float = 10000.0,
        *,
        dtype: torch.dtype = torch.float32,
    ) -> None:
        super().__init__()
        self.word_embedding = nn.Embedding.from_pretrained(
            sinusoidal_encoding(vocab_size, output_dim, base, dtype=dtype), freeze=True
        )
        self.position_embedding = nn.Embedding.from_pretrained(
            sinusoidal_encoding(sequence_length, output_dim, base, dtype=dtype), freeze=True
        )


def random_embedding_with_pe(sentence: str, embed_dim: int = 512, seed: int = 0, base: float = 10000.0) -> dict:
    """Tutorial 002's example: a random embedding per word plus the sinusoidal PE of its position.

    As the tutorial: tokens = sentence.split() (case kept), vocab = word -> index in order,
    embedding_matrix = np.random.rand(vocab_size, embed_dim) (here np.random.RandomState(seed), the
    same stream as np.random.seed(seed); np.random.rand), PE of len(tokens) positions, output =
    embedding_matrix[ids] + PE. A repeated word keeps its first index (the tutorial's dict
    comprehension would keep the last one and index past the matrix).

    Returns tokens, vocab, input_indices (n,), embedding_matrix (V, D), input_embeddings (n, D),
    pe (n, D), output (n, D); arrays float64 numpy.
    """
    if not isinstance(sentence, str) or not sentence.split():
        raise PipelineError(f"random_embedding_with_pe needs a sentence with at least one word, got {sentence!r}.")
    if not _is_int(embed_dim) or embed_dim < 1:
        raise PipelineError(f"embed_dim = {embed_dim!r} is invalid: it must be an integer >= 1, e.g. 512.")
    check_init(seed, "uniform", 1.0)
    tokens = sentence.split()
    vocab = {word: i for i, word in enumerate(dict.fromkeys(tokens))}
    input_indices = np.array([vocab[word] for word in tokens], dtype=np.int64)
    embedding_matrix = np.random.RandomState(int(seed)).rand(len(vocab), embed_dim)
    input_embeddings = embedding_matrix[input_indices]
    pe = sinusoidal_encoding(len(tokens), embed_dim, base, dtype=torch.float64).numpy()
    return {
        "tokens": tokens,
        "vocab": vocab,
        "input_indices": input_indices,
        "embedding_matrix": embedding_matrix,
        "input_embeddings": input_embeddings,
        "pe": pe,
        "output": input_embeddings + pe,
    }
