"""Floating-point operations of the Transformer, counted from its shapes, for model FLOP
utilisation (MFU: the FLOPs a step needs, per second, over the device's peak).

Only matrix products are counted (2 per multiply-add), as is usual for MFU (PaLM, appendix B):
embedding lookups, norms, softmax, masks and the optimizer are left out. Counts are for
the padded shapes a batch is computed in, causal self-attention included at full size (the
kernels compute it so). A training step's backward pass costs twice its forward pass: a
gradient for each operand of every product.
"""

from __future__ import annotations

from .transformer_config import TransformerConfig


def _attention(d_model: int, batch: int, q_len: int, k_len: int, projected_kv_len: int) -> int:
    """One multi-head attention: Q and output projections on q_len positions, K and V
    projections on `projected_kv_len` positions, QKᵀ and the weighted sum of V."""
    projections = 2 * batch * (2 * q_len * d_model * d_model + projected_kv_len * d_model * 2 * d_model)
    scores_and_sum = 2 * 2 * batch * q_len * k_len * d_model  # summed over heads: h · d_head = d
    return projections + scores_and_sum


def _feed_forward(cfg: TransformerConfig, positions: int) -> int:
    return 2 * 2 * positions * cfg.d_model * cfg.d_ff


def forward_flops(cfg: TransformerConfig, tgt_vocab_size: int, batch: int, src_len: int, tgt_len: int) -> int:
    """FLOPs of one teacher-forced forward pass over src [batch, src_len] and
    tgt_in [batch, tgt_len], to logits [batch, tgt_len, tgt_vocab_size]."""
    d = cfg.d_model
    encoder_layer = _attention(d, batch, src_len, src_len, src_len) + _feed_forward(cfg, batch * src_len)
    decoder_layer = (
        _attention(d, batch, tgt_len, tgt_len, tgt_len)  # self-attention
        + _attention(d, batch, tgt_len, src_len, src_len)  # over the encoder output
        + _feed_forward(cfg, batch * tgt_len)
    )
    generator = 2 * batch * tgt_len * d * tgt_vocab_size
    return cfg.n_encoder_layers * encoder_layer + cfg.n_decoder_layers * decoder_layer + generator


def training_flops(cfg: TransformerConfig, tgt_vocab_size: int, batch: int, src_len: int, tgt_len: int) -> int:
    """FLOPs of a forward and backward pass over one batch (3 × the forward pass)."""
    return 3 * forward_flops(cfg, tgt_vocab_size, batch, src_len, tgt_len)
