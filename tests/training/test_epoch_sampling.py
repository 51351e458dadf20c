"""Training on per-epoch re-drawn data (subword sampling + source noise): end to end, and a
resumed run still equals an uninterrupted one (issue 12's resume requirement)."""

from __future__ import annotations

import pytest

from test_train import small_config
from transformer_cli.checkpoint import load_checkpoint
from transformer_cli.training.run_dir import RunDir
from transformer_cli.training.session import run_training

pytestmark = pytest.mark.slow


def _sampled(path, **train):
    cfg = small_config(path, threads=1, source_lowercase=0.3, source_unpunctuated=0.2, **train)
    cfg.tokenizer.sampling = 0.1
    return cfg


def test_sampled_training_resumes_exactly_and_learns(tmp_path):
    straight = _sampled(tmp_path / "a")
    run_training(straight)
    interrupted = _sampled(tmp_path / "b", max_steps=17)  # stops in epoch 2
    run_training(interrupted)
    assert load_checkpoint(interrupted.run_dir / "last.pt")["train_state"]["progress"]["step"] == 17
    interrupted.train.max_steps = None
    run_training(interrupted)
    a, b = (RunDir(c.run_dir).read_metrics() for c in (straight, interrupted))
    ends = [[(r["step"], r["train_loss"], r["valid_loss"]) for r in m if r["end_of_epoch"]] for m in (a, b)]
    assert len(ends[0]) == 3 and ends[0] == ends[1]
    assert a[-1]["valid_loss"] < a[0]["valid_loss"]  # it learns from the re-drawn data
    plain = small_config(tmp_path / "plain", threads=1)
    run_training(plain)
    plain_losses = [r["train_loss"] for r in RunDir(plain.run_dir).read_metrics()]
    assert [r["train_loss"] for r in a] != plain_losses  # it really trained on other text
