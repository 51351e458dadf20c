"""training/console.py: the per-epoch bar a person watching `tfm train` sees: it starts where
the run stands (a resumed epoch part-way), and every 20 steps shows the epoch's loss,
perplexity and speed so far (reading the loss back from the device only then)."""

from __future__ import annotations

import io
import math

import torch

from transformer_cli.training.console import SHOW_EVERY, epoch_bar, show_loss
from transformer_cli.training.progress import Progress


def test_the_bar_starts_where_the_run_stands_and_can_be_off():
    p = Progress(epoch=2, batch_in_epoch=7)
    with epoch_bar(p, 50, enabled=True) as bar:
        assert (bar.n, bar.total, bar.desc) == (7, 50, "epoch 3")
    with epoch_bar(p, 50, enabled=False) as off:
        assert off.disable


def test_the_loss_is_shown_every_20_steps():
    p = Progress(epoch_tokens=1000, epoch_train_s=2.0)
    nll = torch.tensor(1500.0)
    bar = epoch_bar(Progress(), 100, enabled=True)
    bar.fp = io.StringIO()  # (its output)
    bar.update(SHOW_EVERY - 1)
    show_loss(bar, p, nll)
    assert not getattr(bar, "postfix", None)  # not yet
    bar.update(1)
    show_loss(bar, p, nll)
    assert str(bar.postfix) == f"loss=1.500, ppl={math.exp(1.5):.1f}, tok_s=500"
    bar.close()
    hidden = epoch_bar(Progress(), 100, enabled=False)
    hidden.n = SHOW_EVERY
    show_loss(hidden, p, nll)  # a hidden bar reads nothing back
    assert not getattr(hidden, "postfix", None)
