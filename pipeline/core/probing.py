"""Identical word probing (Wang et al., "On Position Embeddings in BERT", ICLR 2021) of a BERT model's first layer:
the same word at every position, so that the first layer's attention can depend on the positions only.

For one word w at positions 0 .. N-1 (token type 0, no [CLS] or [SEP]), the input of layer 0 at position p is
x_p = LayerNorm(E[w] + T[0] + P[p]) (word, token type and position rows, added as HF's BertEmbeddings adds them);
layer 0's projections q_p = x_p Wq^T + bq and k_p = x_p Wk^T + bk, split into H heads of d_h = D / H; head h's
logits L_h[i, j] = q_i^h . k_j^h / sqrt(d_h) and its attention softmax_j(L_h[i, j]): the model's own layer-0
attention for that input (no dropout, no mask). Both are averaged over the words drawn (`probe_words`): the mean
logits are a head's proximity for Wang et al.'s scores, the mean attention its prior for Chen et al.'s.

Computed in float64 from the float32 weights, with portable arithmetic (exact products, portable exp; numpy's own
means along an axis): the same bits on every machine. `weights` is any object with the attributes of
pipeline.inputs.minilm.MiniLM (this layer does not import that one).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from pipeline.core import portable


def probe_words(vocab: tuple[str, ...] | list[str], count: int, seed: int) -> np.ndarray:
    """(count,) ids of whole, lower-case ASCII words of the vocabulary (no word pieces "##...", no [special] or
    [unused] tokens, no single characters), drawn without replacement by numpy's PCG64 seeded `seed` (integer
    arithmetic: the same draw everywhere), in increasing id order."""
    candidates = np.array(
        [i for i, t in enumerate(vocab) if len(t) > 1 and t.isascii() and t.isalpha() and t.islower()]
    )
    if count > len(candidates):
        raise ValueError(f"{count} probe words asked for, the vocabulary has {len(candidates)} whole words")
    return np.sort(candidates[np.random.default_rng(seed).permutation(len(candidates))[:count]])


def layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    """(..., D) (x - mean) / sqrt(var + eps) * weight + bias over the last axis (the biased variance, as torch)."""
    centred = x - x.mean(axis=-1, keepdims=True)
    variance = (centred * centred).mean(axis=-1, keepdims=True)
    return centred / np.sqrt(variance + eps) * weight + bias


def first_layer_inputs(weights: Any, word_ids: np.ndarray, n: int) -> np.ndarray:
    """(W, N, D) float64 LayerNorm(E[w] + T[0] + P[p]) of each word w of word_ids (W,) at positions p < n."""
    word = weights.word[word_ids].astype(np.float64)[:, None, :]
    token_type = weights.token_type[0].astype(np.float64)
    position = weights.position[:n].astype(np.float64)[None, :, :]
    summed = (word + token_type) + position
    return layer_norm(summed, weights.ln_weight.astype(np.float64), weights.ln_bias.astype(np.float64), weights.ln_eps)


def probe(weights: Any, word_ids: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Layer 0's (logits, attention), each (H, N, N), per head, averaged over the words of word_ids (W,)."""
    x = first_layer_inputs(weights, word_ids, n)  # (W, N, D)
    flat = x.reshape(-1, x.shape[-1])
    heads = weights.heads
    d_head = x.shape[-1] // heads

    def project(w: np.ndarray, b: np.ndarray) -> np.ndarray:  # (W, H, N, d_h)
        out = portable.exact_matmul(flat, w.astype(np.float64).T) + b.astype(np.float64)
        return out.reshape(len(word_ids), n, heads, d_head).transpose(0, 2, 1, 3)

    q, k = project(weights.query_w, weights.query_b), project(weights.key_w, weights.key_b)
    logits = portable.exact_matmul(q, k.swapaxes(-1, -2)) / math.sqrt(d_head)  # (W, H, N, N)
    from pipeline.core.pe_properties import softmax_rows

    return logits.mean(axis=0), softmax_rows(logits).mean(axis=0)
