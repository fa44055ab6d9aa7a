"""Padding and look-ahead masks (tutorial 004): shapes, values, boolean vs additive forms."""

from __future__ import annotations

import pytest
import torch

from pipeline.base.errors import PipelineError
from pipeline.tutorials.masks import (
    NEG_INF,
    additive,
    attention_padding_mask,
    combined_mask,
    look_ahead_mask,
    masked_softmax,
    padding_mask,
    padding_mask_from_lengths,
)
from pipeline.inputs.tokenizer import pad_sequences_with_mask

# Tutorial 004's example batch (batch_size, seq_len), padded with 0.
INPUT_SEQ = torch.tensor([[5, 7, 9, 0, 0], [3, 2, 4, 1, 0], [6, 1, 8, 4, 2]])
PADDING = torch.tensor(
    [[False, False, False, True, True], [False, False, False, False, True], [False, False, False, False, False]]
)


def test_padding_mask_values_and_tutorial_004_convention():
    mask = padding_mask(INPUT_SEQ)
    assert mask.dtype == torch.bool and mask.shape == (3, 5)
    assert torch.equal(mask, PADDING)
    tutorial_keep = (INPUT_SEQ != 0).float()  # 004's create_padding_mask: 1 at real tokens
    assert torch.equal(mask, tutorial_keep == 0)


def test_attention_padding_mask_broadcasts_over_heads_and_queries():
    mask = attention_padding_mask(INPUT_SEQ)
    assert mask.shape == (3, 1, 1, 5)
    assert torch.equal(mask[:, 0, 0], PADDING)
    scores = torch.randn(3, 4, 5, 5, generator=torch.Generator().manual_seed(0))  # (batch, heads, q, k)
    weights = masked_softmax(scores, mask)
    assert weights.shape == scores.shape
    assert torch.all(weights[PADDING[:, None, None, :].expand_as(weights)] == 0)


def test_padding_mask_from_lengths_agrees_with_ids_and_the_tokenizer():
    assert torch.equal(padding_mask_from_lengths([3, 4, 5], 5), PADDING)
    assert torch.equal(padding_mask_from_lengths([3, 4, 9], 5), PADDING)  # longer than seq_len: no padding
    sequences = [[5, 7, 9], [3, 2, 4, 1], [6, 1, 8, 4, 2]]
    for padding in ("pre", "post"):
        padded, keep, _ = pad_sequences_with_mask(sequences, maxlen=6, padding=padding)
        from_lengths = padding_mask_from_lengths([len(s) for s in sequences], 6, padding=padding)
        assert torch.equal(from_lengths, torch.as_tensor(~keep))
        assert torch.equal(from_lengths, padding_mask(torch.as_tensor(padded)))


def test_look_ahead_mask_is_the_strict_upper_triangle():
    assert torch.equal(
        look_ahead_mask(3), torch.tensor([[False, True, True], [False, False, True], [False, False, False]])
    )
    for n in (1, 2, 7, 16):
        tutorial = (1 - torch.tril(torch.ones(n, n), diagonal=0)).bool()  # 004's create_look_ahead_mask
        mask = look_ahead_mask(n)
        assert mask.shape == (n, n) and torch.equal(mask, tutorial)
        assert int(mask.sum()) == n * (n - 1) // 2


def test_causal_softmax_only_sees_the_past():
    scores = torch.randn(6, 6, generator=torch.Generator().manual_seed(1))
    weights = masked_softmax(scores, look_ahead_mask(6))
    assert torch.all(weights.triu(diagonal=1) == 0)
    assert weights[0, 0] == 1.0
    # torch's float32 defaults (1.3e-6 relative, ~11 ulp): a sum of 6 weights is within a few ulp of 1 on any kernel
    torch.testing.assert_close(weights.sum(dim=-1), torch.ones(6))


def test_combined_mask_is_look_ahead_or_padding():
    mask = combined_mask(PADDING)
    assert mask.shape == (3, 1, 5, 5)
    for b in range(3):
        expected = look_ahead_mask(5) | PADDING[b][None, :]
        assert torch.equal(mask[b, 0], expected)


def test_additive_form_agrees_with_boolean_form():
    mask = look_ahead_mask(4)[None] | PADDING[:1, None, :4]
    add = additive(mask)
    assert add.dtype == torch.float32 and add.shape == mask.shape
    assert torch.equal(add == NEG_INF, mask) and torch.all(add[~mask] == 0)
    assert additive(mask, torch.float64).dtype == torch.float64


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_additive_softmax_gives_padded_positions_zero_weight(dtype):
    scores = 10 * torch.randn(3, 5, 5, generator=torch.Generator().manual_seed(2), dtype=dtype)
    mask = PADDING[:, None, :]
    weights = masked_softmax(scores, mask)
    assert torch.all(weights[mask.expand_as(weights)] == 0)
    # torch's per-dtype defaults (float32 ~11 ulp, float64 1e-7): sums of 5 weights are within a few ulp of 1 on any
    # kernel, and the two forms below run the same softmax kernel in this process
    torch.testing.assert_close(weights.sum(dim=-1), torch.ones(3, 5, dtype=dtype))
    boolean = torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1)  # the boolean form
    torch.testing.assert_close(weights, boolean)
    keep = (~PADDING).to(dtype)[:, None, :]  # 004's (1 - mask) * -1e9
    torch.testing.assert_close(weights, torch.softmax(scores + (1 - keep) * -1e9, dim=-1))


def test_fully_masked_row_is_uniform_not_nan():
    weights = masked_softmax(torch.tensor([[1.0, 2.0, 3.0]]), torch.tensor([[True, True, True]]))
    assert not torch.isnan(weights).any()
    torch.testing.assert_close(weights, torch.full((1, 3), 1 / 3))


def test_bad_inputs_are_one_clear_error():
    with pytest.raises(PipelineError, match="2-D"):
        padding_mask(torch.tensor([1, 2, 0]))
    with pytest.raises(PipelineError, match="boolean"):
        additive(torch.tensor([0.0, 1.0]))
    with pytest.raises(PipelineError, match="seq_len"):
        look_ahead_mask(0)
    with pytest.raises(PipelineError, match="boolean padding mask"):
        combined_mask(INPUT_SEQ)
    with pytest.raises(PipelineError, match="padding"):
        padding_mask_from_lengths([1], 3, padding="middle")
