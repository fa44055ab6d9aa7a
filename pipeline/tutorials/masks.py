"""Attention masks of tutorial 004 (and the TensorFlow transformer tutorial), in torch.

Convention everywhere: boolean True = masked (the position is hidden from attention).
The additive form is 0.0 where attention is allowed and -1e9 where it is masked; it is added to
the attention scores before the softmax, which then gives the masked keys weight exp(-1e9) = 0.

Shapes:
    padding_mask(ids)                 (batch, seq)        True at padding ids
    padding_mask_from_lengths(n, L)   (batch, L)          True at positions >= length ('post') / < L - length ('pre')
    attention_padding_mask(ids)       (batch, 1, 1, seq)  broadcasts over heads and query positions
    look_ahead_mask(L)                (L, L)              True above the diagonal: query i may not see key j > i
    combined_mask(padding)            (batch, 1, seq, seq) look-ahead OR padding (decoder self-attention)
    additive(mask)                    mask's shape        0.0 / -1e9
    masked_softmax(scores, mask)      scores' shape       softmax(scores + additive(mask)) over the last axis

Tutorial 004's `create_padding_mask` returns the opposite (1.0 at real tokens): it is `~padding_mask`.
"""

from __future__ import annotations

from typing import Sequence

import torch

from pipeline.base.errors import PipelineError

NEG_INF = -1e9


def _check_ids(ids: torch.Tensor) -> None:
    if not isinstance(ids, torch.Tensor) or ids.dim() != 2:
        got = f"shape {tuple(ids.shape)}" if isinstance(ids, torch.Tensor) else type(ids).__name__
        raise PipelineError(
            f"masks take padded token ids as a 2-D tensor (batch, seq), got {got}: "
            "pass e.g. torch.as_tensor(tokens['padded'])."
        )


def padding_mask(ids: torch.Tensor, pad_id: int = 0) -> torch.Tensor:
    """(batch, seq) bool, True where ids == pad_id. Valid only when pad_id is never a real token."""
    _check_ids(ids)
    return ids == pad_id


def padding_mask_from_lengths(
    lengths: Sequence[int] | torch.Tensor, seq_len: int, padding: str = "post", device: torch.device | str | None = None
) -> torch.Tensor:
    """(batch, seq_len) bool from token counts: True at the padding positions ('post': at the end)."""
    if padding not in ("pre", "post"):
        raise PipelineError(f"padding = {padding!r} is invalid: use 'pre' or 'post'.")
    lengths = torch.as_tensor(lengths, device=device).reshape(-1).clamp(max=seq_len)
    positions = torch.arange(seq_len, device=lengths.device)[None, :]
    if padding == "post":
        return positions >= lengths[:, None]
    return positions < (seq_len - lengths)[:, None]


def attention_padding_mask(ids: torch.Tensor, pad_id: int = 0) -> torch.Tensor:
    """(batch, 1, 1, seq) bool: the padding mask shaped to broadcast against (batch, heads, q, k) scores."""
    return padding_mask(ids, pad_id)[:, None, None, :]


def look_ahead_mask(seq_len: int, device: torch.device | str | None = None) -> torch.Tensor:
    """(seq_len, seq_len) bool, True strictly above the diagonal (key j > query i is the future)."""
    if isinstance(seq_len, bool) or not isinstance(seq_len, int) or seq_len < 1:
        raise PipelineError(f"look_ahead_mask needs seq_len >= 1, got {seq_len!r}.")
    return torch.ones(seq_len, seq_len, dtype=torch.bool, device=device).triu(diagonal=1)


def combined_mask(padding: torch.Tensor) -> torch.Tensor:
    """(batch, seq) padding mask -> (batch, 1, seq, seq) bool: look-ahead OR padding of the key.

    What a decoder's self-attention uses; build `padding` with padding_mask(ids) or from lengths.
    """
    if not isinstance(padding, torch.Tensor) or padding.dtype != torch.bool or padding.dim() != 2:
        raise PipelineError(
            "combined_mask takes a boolean padding mask (batch, seq): build it with padding_mask(ids) "
            "or padding_mask_from_lengths(lengths, seq_len)."
        )
    return look_ahead_mask(padding.shape[-1], padding.device)[None, None] | padding[:, None, None, :]


def additive(mask: torch.Tensor, dtype: torch.dtype = torch.float32, neg: float = NEG_INF) -> torch.Tensor:
    """Boolean mask -> 0.0 where allowed, `neg` (-1e9) where masked; same shape."""
    if mask.dtype != torch.bool:
        raise PipelineError(
            f"additive() takes a boolean mask (True = masked), got {mask.dtype}: "
            "build it with padding_mask / look_ahead_mask."
        )
    return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(mask, neg)


def masked_softmax(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """softmax(scores + additive(mask)) over the last axis; `mask` broadcasts against `scores`.

    Masked keys get weight exactly 0 (for scores far from -1e9, in float32 and float64). A row whose
    keys are all masked gets uniform weights instead of the NaNs a -inf mask would give.
    """
    return torch.softmax(scores + additive(mask, scores.dtype), dim=-1)
