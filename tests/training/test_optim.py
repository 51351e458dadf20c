"""training/optim.py: one optimizer step (`Optimization`) accumulates the training step's
gradients as one batch of all its pairs would give them; the schedule; weight decay. Under
several processes: tests/training/test_ddp.py."""

import math

import numpy as np
import torch
from training.test_train import make_trainer, small_config

from transformer_cli.config_train import TrainConfig
from transformer_cli.data.batching import collate
from transformer_cli.seams import SCHEDULES


def test_accumulated_batches_make_the_step_of_one_batch_of_all_their_pairs(tmp_path):
    """accumulate=2: one optimizer step over two batches equals one step over their pairs
    collated as one batch (the same gradient, so the same Adam moments and weights)."""
    # eps well above the rounding noise of gradients that are zero in exact arithmetic (the key
    # biases: softmax ignores them), which Adam's first step would otherwise blow up to ±lr.
    cfg = small_config(tmp_path, accumulate=2, threads=1, clip_norm=None, eps=1e-6)
    cfg.model.dropout = 0.0
    accumulating = make_trainer(cfg)
    [first, second] = accumulating.data.step_indices(0, 0)
    cfg.train.accumulate = 1
    whole = make_trainer(cfg)  # the same seed: the same initial weights

    def batches(*index_sets):
        framing = accumulating.data.augmentation.tokenizers.framing
        return [collate(accumulating.data.split, idx, framing, cfg.model.max_len) for idx in index_sets]

    (tokens, nll), (tokens_whole, nll_whole) = (
        t.optimization.step(group)
        for t, group in ((accumulating, batches(first, second)), (whole, batches(np.concatenate([first, second]))))
    )
    assert tokens == tokens_whole
    assert torch.allclose(nll, nll_whole, rtol=1e-5)
    moments = [[s["exp_avg"] for s in t.optimization.optimizer.state.values()] for t in (accumulating, whole)]
    assert len(moments[0]) == len(moments[1]) > 0
    for a, b in zip(*moments):  # exp_avg after one step = (1 - beta1) * gradient
        assert torch.allclose(a, b, rtol=1e-4, atol=1e-8)
    for a, b in zip(accumulating.model.parameters(), whole.model.parameters()):
        assert torch.allclose(a, b, rtol=1e-4, atol=1e-6)


def test_r_drop_without_dropout_is_the_plain_step(tmp_path):
    """With no dropout both passes agree: KL 0, mean loss = loss, so the same step is taken
    (the loss itself: tests/training/test_step.py)."""
    cfg = small_config(tmp_path, threads=1, clip_norm=None, optimizer_options={"eps": 1e-6})
    cfg.model.dropout = 0.0
    plain = make_trainer(cfg)
    cfg.train.criterion_options = {"rdrop_alpha": 5.0}
    r_drop = make_trainer(cfg)
    group = next(plain.data.steps_from(0, 0))
    (tokens, nll), (tokens_r, nll_r) = plain.optimization.step(group), r_drop.optimization.step(group)
    assert tokens == tokens_r
    assert torch.allclose(nll, nll_r, rtol=1e-5)
    for a, b in zip(plain.model.parameters(), r_drop.model.parameters()):
        assert torch.allclose(a, b, rtol=1e-4, atol=1e-6)


def test_lr_schedules():
    cfg = TrainConfig(schedule="inverse_sqrt", schedule_options={"warmup_steps": 100})
    factors = [SCHEDULES[cfg.schedule](cfg, s) for s in range(400)]
    assert factors[99] == 1.0 and factors[0] == 0.01 and math.isclose(factors[399], 0.5)
    assert SCHEDULES[TrainConfig().schedule](TrainConfig(), 12345) == 1.0


def test_weight_decay_skips_biases_and_layer_norms():
    from transformer_cli.model.transformer import Seq2SeqTransformer
    from transformer_cli.model.transformer_config import TransformerConfig
    from transformer_cli.training.optim import build_optimizer

    model = Seq2SeqTransformer(TransformerConfig(d_model=16, n_heads=2, d_ff=32), 50, 50)
    decayed, plain = build_optimizer(
        model, TrainConfig(optimizer_options={"weight_decay": 0.1}), torch.device("cpu")
    ).param_groups
    assert decayed["weight_decay"] == 0.1 and plain["weight_decay"] == 0.0
    assert all(p.dim() >= 2 for p in decayed["params"]) and all(p.dim() == 1 for p in plain["params"])
    names = {id(p): n for n, p in model.named_parameters()}
    assert all("norm" in names[id(p)] or names[id(p)].endswith("bias") for p in plain["params"])
    assert len(decayed["params"]) + len(plain["params"]) == len(list(model.parameters()))
    [single] = build_optimizer(model, TrainConfig(), torch.device("cpu")).param_groups
    assert single["weight_decay"] == 0.0
