"""Training on per-batch augmented data: with source noise (made in DataLoader workers) a
resumed run equals an uninterrupted one (resuming never changes a run); with subword
sampling as well (SentencePiece's draws, which do not repeat) it resumes and learns."""

from __future__ import annotations

import pytest
from training.test_train import small_config

from transformer_cli.checkpoint import read_payload
from transformer_cli.training.run_dir import RunDir
from transformer_cli.training.session import run_training

pytestmark = pytest.mark.slow


def _noised(path, **train):
    return small_config(
        path,
        threads=1,
        transform_options={"source_noise": {"lowercase": 0.3, "uppercase": 0.1, "unpunctuated": 0.2}},
        data_workers=1,
        **train,
    )


def _ends(cfg):
    return [(r.step, r.train_loss, r.valid_loss) for r in RunDir(cfg.run_dir).read_metrics() if r.end_of_epoch]


def test_noised_training_in_workers_resumes_exactly_and_learns(tmp_path):
    straight = _noised(tmp_path / "a")
    run_training(straight)
    interrupted = _noised(tmp_path / "b", max_steps=17)  # stops in epoch 2
    run_training(interrupted)
    assert read_payload(interrupted.run_dir / "last.pt")["train_state"]["progress"]["step"] == 17
    interrupted.train.max_steps = None
    interrupted.train.data_workers = 2  # the number of workers is not part of the run
    run_training(interrupted)
    assert len(_ends(straight)) == 3 and _ends(straight) == _ends(interrupted)
    a = RunDir(straight.run_dir).read_metrics()
    assert a[-1].valid_loss < a[0].valid_loss  # it learns from the noised data
    plain = small_config(tmp_path / "plain", threads=1)
    run_training(plain)
    assert [r.train_loss for r in a] != [r.train_loss for r in RunDir(plain.run_dir).read_metrics()]


def test_sampled_training_resumes_and_learns(tmp_path):
    cfg = _noised(tmp_path / "s", max_steps=17)
    cfg.tokenizer.sampling = 0.1
    run_training(cfg)
    cfg.train.max_steps = None
    run_training(cfg)
    ends = _ends(cfg)
    assert [e[0] for e in ends] == [13, 26, 39] and ends[-1][2] < ends[0][2]
