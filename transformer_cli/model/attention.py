"""Scaled dot-product attention and multi-head attention (paper §3.2).

Masks are boolean and broadcast to `[batch, heads, q_len, k_len]`, True where attention is
allowed. The hot path is `torch.nn.functional.scaled_dot_product_attention` (fused kernels),
except for bf16 on CPU: there torch's fused CPU kernel is several times slower than two
matmuls and a softmax for the short sentences of translation (forward + backward at
[128, 8, 16, 32]: 43 ms fused vs 5 ms explicit; see docs/results.md), so the explicit path
runs, as it does whenever the attention weights are asked for.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def padding_mask(ids: Tensor, pad_id: int) -> Tensor:
    """[batch, len] ids -> [batch, 1, 1, len] bool, True at real tokens."""
    return (ids != pad_id)[:, None, None, :]


def scaled_dot_product_attention(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None, causal: bool = False, dropout: float = 0.0
) -> tuple[Tensor, Tensor]:
    """Attention(Q, K, V) = softmax(QKᵀ/√d_k) V, returning the weights too.

    q: [batch, heads, q_len, d_head]; k, v: [batch, heads, k_len, d_head].
    Returns ([batch, heads, q_len, d_head], weights [batch, heads, q_len, k_len]).
    """
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    if causal:
        future = torch.ones(q.size(-2), k.size(-2), dtype=torch.bool, device=q.device).triu(1)
        scores = scores.masked_fill(future, float("-inf"))
    weights = scores.softmax(dim=-1)
    return F.dropout(weights, dropout) @ v, weights


class MultiHeadAttention(nn.Module):
    """MultiHead(Q, K, V) = Concat(head_1..head_h) W^O with head_i = Attention(QW_i^Q, KW_i^K, VW_i^V).

    Keys and values are projected by `project_kv` separately from the query, so callers can
    cache them: the decoder's self-attention appends one step at a time, its cross-attention
    projects the encoder output once per sentence.
    """

    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0):
        super().__init__()
        self.n_heads = n_heads
        self.d_head = d_model // n_heads
        self.dropout = dropout
        self.q_proj = nn.Linear(d_model, d_model)
        self.kv_proj = nn.Linear(d_model, 2 * d_model)
        self.out_proj = nn.Linear(d_model, d_model)

    def _heads(self, x: Tensor) -> Tensor:
        """[batch, len, d_model] -> [batch, heads, len, d_head]."""
        b, t, _ = x.shape
        return x.view(b, t, self.n_heads, self.d_head).transpose(1, 2)

    def project_kv(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """[batch, len, d_model] -> keys and values, each [batch, heads, len, d_head]."""
        k, v = self.kv_proj(x).chunk(2, dim=-1)
        return self._heads(k), self._heads(v)

    def forward(
        self,
        query: Tensor,
        kv: tuple[Tensor, Tensor],
        mask: Tensor | None = None,
        causal: bool = False,
        need_weights: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        """query: [batch, q_len, d_model]; kv from `project_kv`.

        Returns ([batch, q_len, d_model], weights [batch, heads, q_len, k_len] or None).
        """
        q = self._heads(self.q_proj(query))
        k, v = kv
        p = self.dropout if self.training else 0.0
        if need_weights or (q.device.type == "cpu" and q.dtype == torch.bfloat16):
            out, weights = scaled_dot_product_attention(q, k, v, mask, causal, p)
        else:
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p, is_causal=causal)
            weights = None
        b, _, t, _ = out.shape
        return self.out_proj(out.transpose(1, 2).reshape(b, t, -1)), weights
