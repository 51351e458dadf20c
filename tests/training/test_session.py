"""training/session.py: one `tfm train`, run_training: a run takes its lock (another holder:
busy, exit 75, nothing made), prepares its data, trains, writes its files and publishes by the
promotion gate; run again it continues where it stood, does nothing when finished, and goes
on when its limits are raised."""

from __future__ import annotations

import json

import pytest
import torch
from helpers import write_config, write_corpus
from training.test_train import small_config

from transformer_cli.checkpoint import Checkpoint, read_payload
from transformer_cli.config_loading import load_config
from transformer_cli.errors import BusyError
from transformer_cli.training.run_dir import RunDir
from transformer_cli.training.session import TrainOutcome, run_training


@pytest.fixture
def tiny(tmp_path):
    """A config of a tiny model on 48 pairs (3 steps an epoch, 2 epochs), one thread."""
    corpus = write_corpus(tmp_path / "corpus", {"train": 48, "val": 8, "test_2016_flickr": 4})
    threads = torch.get_num_threads()
    path = write_config(
        tmp_path / "tiny.yaml",
        tmp_path,
        corpus,
        data={"min_train_pairs": 8},
        train={"epochs": 2, "batch_size": 16, "threads": 1, "data_workers": 0},
    )
    yield load_config(str(path))
    torch.set_num_threads(threads)


def test_a_run_trains_writes_its_files_and_publishes(tiny):
    outcome = run_training(tiny)
    assert isinstance(outcome, TrainOutcome) and outcome.trained and outcome.progress.step == 6
    assert outcome.promotion is not None
    run = RunDir(tiny.run_dir)
    for path in (run.best, run.last, run.published, run.metrics, run.log, run.path / "config.yaml"):
        assert path.is_file(), path
    manifest = json.loads((run.path / "manifest.json").read_text())
    assert manifest["versions"]["torch"] == torch.__version__
    assert Checkpoint.read(run.published).digest == Checkpoint.read(run.best).digest
    assert "train_state" in read_payload(run.last) and not run.locked  # the lock is released
    assert not run_training(tiny).trained  # finished, the same inputs: nothing to do


def test_a_run_another_holds_is_busy_and_nothing_is_made(tiny):
    holder = RunDir(tiny.run_dir)
    holder.lock()
    try:
        with pytest.raises(BusyError, match="is busy: another tfm train holds its lock"):
            run_training(tiny)
    finally:
        holder.unlock()
    assert not tiny.data_dir.exists() and not RunDir(tiny.run_dir).best.exists()


@pytest.mark.slow
def test_resume_continues_the_same_curve(tmp_path):
    # Exact with a fixed thread count (auto may change it mid-run, and with it the rounding).
    straight = small_config(tmp_path / "a", threads=1)
    run_training(straight)
    interrupted = small_config(tmp_path / "b", max_steps=17, threads=1)  # stops mid-epoch 2
    run_training(interrupted)
    assert read_payload(interrupted.run_dir / "last.pt")["train_state"]["progress"]["step"] == 17
    interrupted.train.max_steps = None  # the same command without the cap: continues
    run_training(interrupted)
    a, b = (RunDir(c.run_dir).read_metrics() for c in (straight, interrupted))
    ends_a = [(r.step, r.train_loss, r.valid_loss) for r in a if r.end_of_epoch]
    ends_b = [(r.step, r.train_loss, r.valid_loss) for r in b if r.end_of_epoch]
    assert len(ends_a) == 3 and ends_a == ends_b


@pytest.mark.slow
def test_finished_run_is_a_no_op_and_more_epochs_continue(tmp_path):
    cfg = small_config(tmp_path, epochs=1)
    assert run_training(cfg).trained
    assert not run_training(cfg).trained
    cfg.train.epochs = 2
    outcome = run_training(cfg)
    assert outcome.trained and outcome.progress.epoch == 2
