"""model/attention.py: scaled dot-product attention as the paper writes it (masked keys and
the future get no weight), multi-head attention whose fused path (torch's kernel) equals the
explicit one, keys and values projected apart so callers can cache them, and the padding mask."""

from __future__ import annotations

import math

import torch

from transformer_cli.model.attention import MultiHeadAttention, padding_mask, scaled_dot_product_attention


def test_explicit_attention_path_equals_fused():
    torch.manual_seed(0)
    mha = MultiHeadAttention(32, 4).eval()
    x, mem = torch.randn(2, 5, 32), torch.randn(2, 7, 32)
    mask = torch.ones(2, 1, 1, 7, dtype=torch.bool)
    mask[1, ..., 5:] = False
    for kv, m, causal in (((mha.project_kv(mem)), mask, False), (mha.project_kv(x), None, True)):
        fused, none = mha(x, kv, m, causal)
        explicit, weights = mha(x, kv, m, causal, need_weights=True)
        assert none is None and torch.allclose(fused, explicit, atol=1e-5)
        assert torch.allclose(weights.sum(-1), torch.ones(()), atol=1e-5)
    _, w = mha(x, mha.project_kv(mem), mask, need_weights=True)
    assert torch.all(w[1, ..., 5:] == 0)


def test_attention_is_the_softmax_of_scaled_scores_over_the_allowed_keys():
    torch.manual_seed(1)
    q, k, v = torch.randn(1, 2, 3, 4), torch.randn(1, 2, 5, 4), torch.randn(1, 2, 5, 4)
    out, weights = scaled_dot_product_attention(q, k, v)
    expected = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(4), dim=-1)
    torch.testing.assert_close(weights, expected)
    torch.testing.assert_close(out, expected @ v)
    mask = torch.tensor([True, True, False, True, False])[None, None, None, :]
    _, masked = scaled_dot_product_attention(q, k, v, mask)
    assert torch.all(masked[..., [2, 4]] == 0) and torch.allclose(masked.sum(-1), torch.ones(1, 2, 3))
    _, causal = scaled_dot_product_attention(q, k[:, :, :3], v[:, :, :3], causal=True)
    assert torch.all(causal.triu(1) == 0) and torch.all(causal[..., 0, 0] == 1)


def test_keys_and_values_are_projected_apart_and_bf16_on_a_cpu_takes_the_explicit_path():
    torch.manual_seed(0)
    mha = MultiHeadAttention(32, 4).eval()
    mem = torch.randn(2, 7, 32)
    k, v = mha.project_kv(mem)
    assert k.shape == v.shape == (2, 4, 7, 8)
    whole = mha.kv_proj(mem)
    torch.testing.assert_close(k.transpose(1, 2).reshape(2, 7, 32), whole[..., :32])
    half = mha.to(torch.bfloat16)
    out, weights = half(mem[:, :3].bfloat16(), half.project_kv(mem.bfloat16()))
    assert out.dtype == torch.bfloat16 and weights is not None  # the explicit path ran


def test_the_padding_mask_is_true_at_real_tokens():
    ids = torch.tensor([[5, 6, 1, 1], [7, 1, 8, 9]])
    assert padding_mask(ids, pad_id=1).shape == (2, 1, 1, 4)
    assert padding_mask(ids, pad_id=1)[:, 0, 0].tolist() == [[True, True, False, False], [True, False, True, True]]
