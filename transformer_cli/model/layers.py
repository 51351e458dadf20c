"""Building blocks of the encoder and decoder stacks (paper §3.1, §3.3, §3.4, §3.5)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .attention import MultiHeadAttention

# model.activation -> the function (gelu: exact, erf-based; swish: SiLU, x·sigmoid(x))
ACTIVATIONS: dict[str, Callable[[Tensor], Tensor]] = {"relu": F.relu, "gelu": F.gelu, "swish": F.silu}


class Dropout(nn.Module):
    """Inverted dropout, with a cheaper random mask on CPU.

    torch's CPU dropout draws a float per element (bernoulli_), which took ~15% of a CPU
    training step here; 16-bit random integers compared with a threshold give the same
    drop probability (to 1/32768) in about half the time. Other devices use F.dropout.
    """

    def __init__(self, p: float):
        super().__init__()
        self.p = p

    def forward(self, x: Tensor) -> Tensor:
        if not self.training or self.p == 0.0:
            return x
        if x.device.type != "cpu":
            return F.dropout(x, self.p, training=True)
        keep = torch.empty(x.shape, dtype=torch.int16).random_() >= round(self.p * 32768)
        return x * keep * (1.0 / (1.0 - self.p))

    def extra_repr(self) -> str:
        return f"p={self.p}"


class TokenEmbedding(nn.Module):
    """Embedding lookup multiplied by √d_model (§3.4), unless `scaled` is off."""

    def __init__(self, vocab_size: int, d_model: int, scaled: bool = True):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.scale = math.sqrt(d_model) if scaled else 1.0

    @property
    def weight(self) -> Tensor:
        return self.embedding.weight

    def forward(self, ids: Tensor) -> Tensor:
        """[batch, len] -> [batch, len, d_model]."""
        return cast(Tensor, self.embedding(ids)) * self.scale


class SinusoidalPositionalEncoding(nn.Module):
    """PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(...) (§3.5).

    `layout` "halves" puts the same values in another order: the d/2 sines first, then the
    d/2 cosines, as transformers' Marian models do (computed as they compute it, in float64).
    """

    table: Tensor  # [max_positions, d_model], a buffer

    def __init__(self, d_model: int, max_positions: int, layout: str = "interleaved"):
        super().__init__()
        if layout == "halves":
            angle = torch.arange(max_positions, dtype=torch.float64)[:, None] / torch.pow(
                10000.0, torch.arange(0, d_model, 2, dtype=torch.float64) / d_model
            )
            table = torch.cat([torch.sin(angle), torch.cos(angle)], dim=1).float()
        else:
            position = torch.arange(max_positions, dtype=torch.float32)[:, None]
            inv_freq = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(10000.0) / d_model))
            table = torch.zeros(max_positions, d_model)
            table[:, 0::2] = torch.sin(position * inv_freq)
            table[:, 1::2] = torch.cos(position * inv_freq)
        self.register_buffer("table", table, persistent=False)

    def forward(self, start: int, length: int) -> Tensor:
        """Encodings of positions start..start+length-1: [length, d_model]."""
        return self.table[start : start + length]


class LearnedPositionalEmbedding(nn.Module):
    """A trained vector per position, as in the notebook (limited to `max_positions` positions)."""

    def __init__(self, d_model: int, max_positions: int):
        super().__init__()
        self.embedding = nn.Embedding(max_positions, d_model)

    def forward(self, start: int, length: int) -> Tensor:
        """[length, d_model]."""
        positions = torch.arange(start, start + length, device=self.embedding.weight.device)
        return cast(Tensor, self.embedding(positions))


class PositionwiseFeedForward(nn.Module):
    """FFN(x) = act(x W_1 + b_1) W_2 + b_2, applied at each position (§3.3)."""

    def __init__(self, d_model: int, d_ff: int, activation: str = "relu", activation_dropout: float = 0.0):
        super().__init__()
        self.w_1 = nn.Linear(d_model, d_ff)
        self.w_2 = nn.Linear(d_ff, d_model)
        self.activation = ACTIVATIONS[activation]
        self.dropout = Dropout(activation_dropout)

    def forward(self, x: Tensor) -> Tensor:
        """[batch, len, d_model] -> [batch, len, d_model]."""
        return cast(Tensor, self.w_2(self.dropout(self.activation(self.w_1(x)))))


class ResidualNorm(nn.Module):
    """A sublayer wrapped in its residual connection and LayerNorm (§3.1, §5.4).

    Post-norm (the paper): LayerNorm(x + Dropout(Sublayer(x))).
    Pre-norm (more stable for deep stacks): x + Dropout(Sublayer(LayerNorm(x))).
    """

    def __init__(self, d_model: int, dropout: float, pre_norm: bool):
        super().__init__()
        self.norm = nn.LayerNorm(d_model)
        self.dropout = Dropout(dropout)
        self.pre_norm = pre_norm

    def forward(self, x: Tensor, sublayer: Callable[[Tensor], Tensor]) -> Tensor:
        """x: [batch, len, d_model]; `sublayer` maps its input to an output of the same shape."""
        if self.pre_norm:
            return x + cast(Tensor, self.dropout(sublayer(self.norm(x))))
        return cast(Tensor, self.norm(x + self.dropout(sublayer(x))))


@dataclass
class LayerCache:
    """Keys/values a decoder layer keeps between incremental steps, each [batch, heads, len, d_head]."""

    self_k: Tensor
    self_v: Tensor
    cross_k: Tensor
    cross_v: Tensor

    def reorder(self, index: Tensor) -> LayerCache:
        return LayerCache(*(t.index_select(0, index) for t in (self.self_k, self.self_v, self.cross_k, self.cross_v)))


class EncoderLayer(nn.Module):
    """Self-attention, then the position-wise feed-forward network; each with residual + norm."""

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        d_ff: int,
        dropout: float,
        attention_dropout: float,
        activation: str,
        activation_dropout: float,
        pre_norm: bool,
    ):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, n_heads, attention_dropout)
        self.feed_forward = PositionwiseFeedForward(d_model, d_ff, activation, activation_dropout)
        self.attn_block = ResidualNorm(d_model, dropout, pre_norm)
        self.ff_block = ResidualNorm(d_model, dropout, pre_norm)

    def forward(self, x: Tensor, src_mask: Tensor) -> Tensor:
        """x: [batch, src_len, d_model]; src_mask: [batch, 1, 1, src_len]."""
        x = self.attn_block(x, lambda h: self.self_attn(h, self.self_attn.project_kv(h), src_mask)[0])
        return cast(Tensor, self.ff_block(x, self.feed_forward))


class DecoderLayer(nn.Module):
    """Masked self-attention, attention over the encoder output, feed-forward network."""

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        d_ff: int,
        dropout: float,
        attention_dropout: float,
        activation: str,
        activation_dropout: float,
        pre_norm: bool,
    ):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, n_heads, attention_dropout)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, attention_dropout)
        self.feed_forward = PositionwiseFeedForward(d_model, d_ff, activation, activation_dropout)
        self.self_block = ResidualNorm(d_model, dropout, pre_norm)
        self.cross_block = ResidualNorm(d_model, dropout, pre_norm)
        self.ff_block = ResidualNorm(d_model, dropout, pre_norm)

    def forward(
        self, x: Tensor, memory: Tensor, src_mask: Tensor, need_weights: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        """Whole target at once. x: [batch, tgt_len, d_model]; memory: [batch, src_len, d_model].

        Returns the new x and, with `need_weights`, the cross-attention weights
        [batch, heads, tgt_len, src_len].
        """
        memory_kv = self.cross_attn.project_kv(memory)
        weights: Tensor | None = None

        def cross_attention(h: Tensor) -> Tensor:
            nonlocal weights
            out: Tensor
            out, weights = self.cross_attn(h, memory_kv, src_mask, need_weights=need_weights)
            return out

        x = self.self_block(x, lambda h: self.self_attn(h, self.self_attn.project_kv(h), causal=True)[0])
        x = self.cross_block(x, cross_attention)
        return self.ff_block(x, self.feed_forward), weights

    def start_cache(self, memory: Tensor) -> LayerCache:
        """Project the encoder output once; the self-attention cache starts empty."""
        cross_k, cross_v = self.cross_attn.project_kv(memory)
        b, h, _, d = cross_k.shape
        empty = cross_k.new_zeros(b, h, 0, d)
        return LayerCache(empty, empty, cross_k, cross_v)

    def step(self, x: Tensor, src_mask: Tensor, cache: LayerCache) -> tuple[Tensor, LayerCache]:
        """One new position. x: [batch, 1, d_model]. Returns it transformed, and the grown cache.

        Equal to the last position of `forward` over the whole prefix: the prefix's keys and
        values come from the cache, so there is no future position to mask.
        """
        grown = cache

        def self_attention(h: Tensor) -> Tensor:
            nonlocal grown
            k, v = self.self_attn.project_kv(h)  # the new position's, each [batch, heads, 1, d_head]
            grown = LayerCache(
                torch.cat([cache.self_k, k], dim=2), torch.cat([cache.self_v, v], dim=2), cache.cross_k, cache.cross_v
            )
            return cast(Tensor, self.self_attn(h, (grown.self_k, grown.self_v))[0])

        x = self.self_block(x, self_attention)
        x = self.cross_block(x, lambda h: self.cross_attn(h, (cache.cross_k, cache.cross_v), src_mask)[0])
        return self.ff_block(x, self.feed_forward), grown
