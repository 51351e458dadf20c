"""model/layers.py: the CPU dropout that draws int16 thresholds instead of floats."""

from __future__ import annotations

import pytest
import torch

from transformer_cli.model.layers import Dropout


@pytest.mark.parametrize("p", [0.1, 0.3, 0.5])
def test_dropout_keeps_one_minus_p_and_scales_the_kept_values(p):
    torch.manual_seed(0)
    x = torch.rand(1000, 1000) + 0.5  # no zeros: a zero in the output means dropped
    y = Dropout(p).train()(x)
    kept = y != 0
    # 1e6 Bernoulli draws: the standard deviation of the keep rate is < 0.0005.
    assert abs(kept.float().mean().item() - (1 - p)) < 0.003
    assert torch.allclose(y[kept], x[kept] / (1 - p))


def test_dropout_masks_differ_between_calls_and_follow_the_seed():
    x = torch.ones(64, 64)
    layer = Dropout(0.5).train()
    torch.manual_seed(1)
    first, second = layer(x), layer(x)
    torch.manual_seed(1)
    assert not torch.equal(first, second) and torch.equal(layer(x), first)


def test_dropout_is_the_identity_in_eval_mode_and_at_p_zero():
    x = torch.randn(8, 16)
    assert Dropout(0.3).eval()(x) is x
    assert Dropout(0.0).train()(x) is x


def test_dropout_keeps_the_dtype_and_passes_gradients_through_kept_values():
    x = torch.ones(200, 200, dtype=torch.bfloat16, requires_grad=True)
    y = Dropout(0.2).train()(x)
    assert y.dtype == torch.bfloat16
    y.float().sum().backward()
    kept = y.detach() != 0
    assert torch.equal(x.grad[kept], torch.full_like(x.grad[kept], 1 / 0.8))
    assert torch.all(x.grad[~kept] == 0)
