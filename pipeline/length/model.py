"""A tiny causal transformer in nanoGPT's shape, in which the position-encoding family is the only difference:

    ids (B, T) -> token embedding (B, T, d)   [+ rows 0 .. T-1 of the position table: sinusoidal, learned;
                                                rows p_0 < .. < p_T-1 drawn from 0 .. R-1: randomized]
      -> layers x Block:   x + Attention(LN(x)),   x + MLP(LN(x))
      -> LN -> head: logits (B, T - first, vocab)    [the last block computes only positions first .. T-1]

    Attention: q, k, v (B, H, T, d/H)  [rope: q and k rotated]  ->  softmax(q k^T / sqrt(d/H) + bias) v

Where each family puts position, each with the core's own function (no second implementation):

    sinusoidal  added to the embedding: pipeline.core.encoding.sinusoidal_encoding (a fixed buffer)
    learned     added to the embedding: a trained table drawn by pipeline.core.random_tables.learned_position_table
    randomized  the sinusoid's rows at positions drawn anew for every batch, in training and in testing: T distinct
                positions of 0 .. R-1 (R = random_range, beyond the longest test input), in order (Ruoss et al. 2023)
    rope        q and k rotated: pipeline.core.rope.rotate by the angle tables of the configured scaling
                (pipeline.core.rope_scaling; rope.angle_tables), times the scaling's attention factor
    alibi       the bias -m_h (i - j) of pipeline.core.alibi.bias with the slopes of alibi.slopes(H)
    nope        nothing

The bias of every family is pipeline.core.alibi.bias: with ALiBi's slopes, or with slope 0, which leaves the causal
mask alone (0 on and below the diagonal, -inf above it).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
from torch import nn

from pipeline.base.errors import PipelineError
from pipeline.core import alibi, rope_scaling
from pipeline.core.choices import LENGTH_FAMILIES as FAMILIES
from pipeline.core.encoding import sinusoidal_encoding
from pipeline.core.random_tables import learned_position_table
from pipeline.core.rope import angle_tables, rotate


# The scalings' published settings (relative.scaling's defaults in pipeline/config/schema.py, which a test checks):
# YaRN's beta_fast and beta_slow, Llama 3.1's low and high frequency factors
YARN_BETAS = (32.0, 1.0)
LLAMA3_FREQ_FACTORS = (1.0, 4.0)


class Spec(NamedTuple):
    """Everything that decides a model's architecture and initial weights."""

    family: str  # one of FAMILIES
    vocab: int  # token ids: the task's symbols and its separator
    positions: int  # the longest input the model takes (rows of the position table, side of the bias)
    seed: int  # the initial weights (torch's generator) and the learned table (its own generator)
    d_model: int = 64
    layers: int = 2
    heads: int = 4
    mlp: int = 4  # the MLP's width over d_model
    rope_base: float = 10000.0
    rope_layout: str = "half_split"
    rope_scaling: str = "default"  # one of pipeline.core.rope_scaling.SCALINGS
    rope_factor: float = 1.0  # s: the context the scaling extends to, over rope_context
    rope_context: int = 1  # L: the positions the model is trained on (the scalings' original context)
    learned_init: str = "normal"
    learned_scale: float = 0.7071067811865476  # sqrt(1/2): rows of the sinusoid's norm sqrt(d/2)
    random_range: int = 0  # R: the randomized family's positions are drawn from 0 .. R-1


def rope_frequencies(spec: Spec, length: int) -> rope_scaling.RopeFrequencies:
    """The (d_head/2,) inverse frequencies and attention factor of spec's RoPE scaling for an input of `length`
    positions: dynamic NTK and LongRoPE change beyond the training context rope_context, the others do not. The
    scalings' other settings are the published ones (YARN_BETAS, LLAMA3_FREQ_FACTORS)."""
    d_head, base, s, context = spec.d_model // spec.heads, spec.rope_base, spec.rope_factor, spec.rope_context
    scaling = spec.rope_scaling
    if scaling == "default":
        return rope_scaling.RopeFrequencies(rope_scaling.default_frequencies(d_head, base), 1.0)
    if scaling == "linear":
        return rope_scaling.linear(d_head, base, s)
    if scaling == "ntk":
        return rope_scaling.ntk(d_head, base, s)
    if scaling == "dynamic":
        return rope_scaling.dynamic(d_head, base, s, context, length)
    if scaling == "yarn":
        return rope_scaling.yarn(d_head, base, s, context, *YARN_BETAS)
    if scaling == "llama3":
        return rope_scaling.llama3(d_head, base, s, context, *LLAMA3_FREQ_FACTORS)
    if scaling == "longrope":
        return rope_scaling.longrope(d_head, base, s, context, length)
    raise PipelineError(f"RoPE scaling {scaling!r} is not one of {', '.join(rope_scaling.SCALINGS)}")


class Attention(nn.Module):
    def __init__(self, spec: Spec) -> None:
        super().__init__()
        self.heads, self.layout = spec.heads, spec.rope_layout
        self.qkv = nn.Linear(spec.d_model, 3 * spec.d_model)
        self.proj = nn.Linear(spec.d_model, spec.d_model)

    def forward(self, x: torch.Tensor, bias: torch.Tensor, rope: tuple | None, first: int = 0) -> torch.Tensor:
        """x (B, T, d); bias (H or 1, T - first, T); rope: (cos, sin) (T, d_head/2) or None -> (B, T - first, d)."""
        B, T, d = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)  # (B, H, T, d_h)
        q = q[:, :, first:]
        if rope is not None:
            q, k = rotate(q, rope[0][first:], rope[1][first:], self.layout), rotate(k, *rope, self.layout)
        scores = q @ k.transpose(-2, -1) / math.sqrt(d // self.heads) + bias  # (B, H, T - first, T)
        return self.proj((scores.softmax(dim=-1) @ v).transpose(1, 2).reshape(B, T - first, d))


class Block(nn.Module):
    def __init__(self, spec: Spec) -> None:
        super().__init__()
        self.norm1, self.attention = nn.LayerNorm(spec.d_model), Attention(spec)
        self.norm2 = nn.LayerNorm(spec.d_model)
        width = spec.mlp * spec.d_model
        self.mlp = nn.Sequential(nn.Linear(spec.d_model, width), nn.GELU(), nn.Linear(width, spec.d_model))

    def forward(self, x: torch.Tensor, bias: torch.Tensor, rope: tuple | None, first: int = 0) -> torch.Tensor:
        x = x[:, first:] + self.attention(self.norm1(x), bias[:, first:], rope, first)
        return x + self.mlp(self.norm2(x))


class Model(nn.Module):
    def __init__(self, spec: Spec) -> None:
        super().__init__()
        check_spec(spec)
        self.spec = spec
        self.embed = nn.Embedding(spec.vocab, spec.d_model)
        self.blocks = nn.ModuleList(Block(spec) for _ in range(spec.layers))
        self.norm = nn.LayerNorm(spec.d_model)
        self.head = nn.Linear(spec.d_model, spec.vocab)
        P, d = spec.positions, spec.d_model
        if spec.family in ("sinusoidal", "randomized"):
            rows = spec.random_range if spec.family == "randomized" else P
            self.register_buffer("table", sinusoidal_encoding(rows, d), persistent=False)
        elif spec.family == "learned":
            self.table = nn.Parameter(
                learned_position_table(P, d, spec.seed, init=spec.learned_init, scale=spec.learned_scale)
            )
        else:
            self.table = None
        slopes = alibi.slopes(spec.heads) if spec.family == "alibi" else torch.zeros(1, dtype=torch.float64)
        self.register_buffer("bias", alibi.bias(slopes, P).to(torch.float32), persistent=False)  # (H or 1, P, P)
        self._rope: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}

    def rope_tables(self, length: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(cos, sin), each (length, d_head/2) float32 on the model's device, times the scaling's attention factor;
        computed once per length."""
        if length not in self._rope:
            d_head = self.spec.d_model // self.spec.heads
            theta, factor = rope_frequencies(self.spec, length)
            device = self.bias.device
            cos, sin = angle_tables(torch.arange(length), d_head, theta=torch.from_numpy(theta), device=device)
            self._rope[length] = (cos * factor, sin * factor) if factor != 1.0 else (cos, sin)
        return self._rope[length]

    def forward(self, ids: torch.Tensor, first: int = 0, where: torch.Tensor | None = None) -> torch.Tensor:
        """ids (B, T) int64 -> logits (B, T - first, vocab) of positions first .. T-1; where: the table's rows (T,)
        (`positions`; None: 0 .. T-1)."""
        T = ids.shape[1]
        if T > self.spec.positions:
            raise PipelineError(
                f"an input of {T} positions is longer than the {self.spec.positions} the model was built for: build it "
                "with more positions (the experiment sizes them for its longest test length)."
            )
        x = self.embed(ids)
        if self.table is not None:
            x = x + self.table[:T] if where is None else x + self.table[where]
        bias = self.bias[:, :T, :T]
        rope = self.rope_tables(T) if self.spec.family == "rope" else None
        for i, block in enumerate(self.blocks):
            x = block(x, bias, rope, first if i == len(self.blocks) - 1 else 0)
        return self.head(self.norm(x))


def positions(spec: Spec, T: int, generator: torch.Generator) -> torch.Tensor | None:
    """The randomized family's rows for an input of T positions: T distinct positions of 0 .. random_range - 1 drawn
    from `generator`, in order; None for every other family (0 .. T-1)."""
    if spec.family != "randomized":
        return None
    return torch.randperm(spec.random_range, generator=generator)[:T].sort().values


def rescaled(model: Model, scaling: str, factor: float) -> Model:
    """The trained RoPE `model` with its frequencies scaled at test time (`scaling` of pipeline.core.rope_scaling for
    a context `factor` times its training context; the same weights, no fine-tuning)."""
    model.spec, model._rope = model.spec._replace(rope_scaling=scaling, rope_factor=float(factor)), {}
    return model


def check_spec(spec: Spec) -> Spec:
    if spec.family not in FAMILIES or (spec.family == "randomized" and spec.random_range < spec.positions):
        raise PipelineError(
            f"position family {spec.family!r} is not one of {', '.join(FAMILIES)} (randomized: drawn from at least "
            f"{spec.positions} positions)."
        )
    if spec.d_model % spec.heads or (spec.family == "rope" and (spec.d_model // spec.heads) % 2):
        raise PipelineError(
            f"d_model = {spec.d_model} must split into {spec.heads} heads (of an even size for RoPE, which rotates "
            "pairs): change length.model.d_model or length.model.heads."
        )
    return spec


def build(spec: Spec, device: torch.device | str = "cpu") -> Model:
    """The model of `spec` with its initial weights drawn from torch's generator seeded with spec.seed (the global
    generator's state is put back afterwards), on `device`."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(spec.seed)
        return Model(spec).to(device)
