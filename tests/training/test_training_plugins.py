"""The training seams from outside the package: an optimizer, a learning-rate schedule and a
criterion, each one registry entry named by its config key, are what a Trainer steps with."""

from __future__ import annotations

import pytest
import torch
from training.test_train import make_trainer, small_config

from transformer_cli.errors import UsageError
from transformer_cli.loss import sequence_loss
from transformer_cli.seams import CRITERIA, OPTIMIZERS, SCHEDULES


def _sgd(groups, cfg, device):
    return torch.optim.SGD(groups, lr=cfg.lr)


def _halving(cfg, step):
    return 0.5**step


class PlainNll:
    """Cross-entropy without smoothing, counted as a user's criterion would be."""

    calls = 0

    def __init__(self, pad_id: int):
        self.pad_id = pad_id

    def __call__(self, net, batch, dtype):
        PlainNll.calls += 1
        logits = net(batch.src, batch.tgt_in)
        return sequence_loss(logits, batch.tgt_out, self.pad_id, 0.0)


@pytest.fixture
def plugins():
    OPTIMIZERS.register("sgd", _sgd)
    SCHEDULES.register("halving", _halving)
    CRITERIA.register("plain_nll", lambda tc, pad_id: PlainNll(pad_id))
    yield
    OPTIMIZERS.unregister("sgd")
    SCHEDULES.unregister("halving")
    CRITERIA.unregister("plain_nll")


def test_registered_optimizer_schedule_and_criterion_train_the_model(tmp_path, plugins):
    cfg = small_config(
        tmp_path, threads=1, optimizer="sgd", schedule="halving", criterion="plain_nll", lr=0.5, clip_norm=None
    )
    trainer = make_trainer(cfg)
    optimization = trainer.optimization
    assert type(optimization.optimizer) is torch.optim.SGD
    before = [p.detach().clone() for p in trainer.model.parameters()]
    steps = trainer.data.steps_from(0, 0)
    lrs = []
    for _ in range(3):
        lrs.append(optimization.optimizer.param_groups[0]["lr"])
        tokens, nll = optimization.step(next(steps))
        assert tokens > 0 and torch.isfinite(nll)
    assert lrs == [0.5, 0.25, 0.125]
    assert PlainNll.calls >= 3
    assert any(not torch.equal(a, b) for a, b in zip(before, trainer.model.parameters()))


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("optimizer", "adamax", "train.optimizer: unknown optimizer 'adamax' (known: adam, adamw)"),
        (
            "schedule",
            "cosine",
            "train.schedule: unknown learning-rate schedule 'cosine' (known: constant, inverse_sqrt)",
        ),
        ("criterion", "focal", "train.criterion: unknown training criterion 'focal' (known: cross_entropy)"),
    ],
)
def test_an_unknown_name_is_refused_with_its_key_and_the_known_ones(tmp_path, key, value, message):
    with pytest.raises(UsageError) as refused:  # where the config is loaded (run.yaml:LINE: ...)
        small_config(tmp_path, threads=1, **{key: value})
    assert str(refused.value).endswith(f": {message}") and "run.yaml:" in str(refused.value)
