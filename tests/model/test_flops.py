"""The FLOP count MFU is computed from, against torch's own count of a real forward and
backward pass (`torch.utils.flop_counter`, which counts matrix products as we do)."""

from __future__ import annotations

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from transformer_cli.model.flops import forward_flops, training_flops
from transformer_cli.model.transformer import Seq2SeqTransformer
from transformer_cli.model.transformer_config import TransformerConfig


@pytest.mark.parametrize(
    "shape",
    [
        {"n_encoder_layers": 2, "n_decoder_layers": 1, "d_ff": 96},
        {"n_encoder_layers": 1, "n_decoder_layers": 3, "d_ff": 64, "norm": "pre", "tie_output": True},
    ],
)
def test_counted_flops_are_torchs_count_of_a_training_step(shape):
    torch.manual_seed(0)
    cfg = TransformerConfig(**{"d_model": 32, "n_heads": 4, "dropout": 0.0, "max_len": 64, **shape})
    model = Seq2SeqTransformer(cfg, 50, 40).train()
    batch, src_len, tgt_len = 3, 9, 6
    src, tgt = torch.randint(4, 40, (batch, src_len)), torch.randint(4, 40, (batch, tgt_len))
    # bf16 on the CPU takes the explicit attention path, whose products torch can count (its
    # fused CPU kernel has no FLOP formula); the count does not depend on the dtype.
    with torch.autocast("cpu", dtype=torch.bfloat16), FlopCounterMode(display=False) as forward:
        logits = model(src, tgt)
    assert forward.get_total_flops() == forward_flops(cfg, 40, batch, src_len, tgt_len)
    with FlopCounterMode(display=False) as backward:
        logits.float().sum().backward()
    total = forward.get_total_flops() + backward.get_total_flops()
    assert total == training_flops(cfg, 40, batch, src_len, tgt_len)
