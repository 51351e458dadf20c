"""training/loop.py: the Trainer on a tiny prepared corpus, in this process: epochs of steps,
a validation at each end (best.pt when it improves, last.pt with the resumable state), a run
resumed from last.pt goes on where it stood, a finished run continues only when its limits
are raised, a parent's weights and record, and a stop request saves before it exits."""

from __future__ import annotations

import pytest
import torch
from helpers import write_config, write_corpus

from transformer_cli.checkpoint import Checkpoint
from transformer_cli.config_loading import load_config
from transformer_cli.data.preprocess import prepare
from transformer_cli.errors import StoppedBySignal
from transformer_cli.training.build import build_trainer
from transformer_cli.training.distributed import DistContext
from transformer_cli.training.loop import Trainer
from transformer_cli.training.run_dir import RunDir
from transformer_cli.training.signals import GracefulStop


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return write_corpus(tmp_path_factory.mktemp("loop-corpus"), {"train": 48, "val": 8, "test_2016_flickr": 4})


@pytest.fixture
def restored_threads():
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def tiny_trainer(folder, corpus, stop: GracefulStop | None = None, **train) -> Trainer:
    """A Trainer of a tiny model on 48 pairs (3 steps an epoch), on the CPU, one thread."""
    path = write_config(
        folder / "loop.yaml",
        folder,
        corpus,
        data={"min_train_pairs": 8},
        train={"epochs": 2, "batch_size": 16, "threads": 1, "data_workers": 0, **train},
    )
    cfg = load_config(str(path))
    prepared, _ = prepare(cfg)
    run = RunDir(cfg.run_dir)
    run.create()
    return build_trainer(cfg, prepared, run, torch.device("cpu"), DistContext(), stop or GracefulStop(), False)


def test_epochs_of_steps_each_validated_with_best_and_last_saved(tmp_path, corpus, restored_threads):
    trainer = tiny_trainer(tmp_path, corpus)
    trainer.run()
    p = trainer.progress
    assert (p.finished, p.stop_reason, p.epoch, p.step) == (True, "epochs", 2, 6)
    assert [(r.epoch, r.step, r.end_of_epoch) for r in p.history] == [(1, 3, True), (2, 6, True)]
    assert p.history[1].valid_loss < p.history[0].valid_loss and p.best_step == 6
    best, last = Checkpoint.read(trainer.run_dir.best), Checkpoint.read(trainer.run_dir.last)
    assert best.metrics["step"] == 6 and last.train_state is not None
    assert last.train_state.progress["step"] == 6 and last.train_state.world_size == 1
    assert best.run_identity == trainer.identity and best.data_fingerprint == trainer.prepared.fingerprint
    assert [r.step for r in trainer.run_dir.read_metrics()] == [3, 6]
    assert not trainer.extend_if_asked()  # finished, limits unchanged: nothing to do
    trainer.cfg.train.epochs = 3
    assert trainer.extend_if_asked() and not trainer.progress.finished


def test_a_run_resumed_from_last_pt_goes_on_where_it_stood(tmp_path, corpus, restored_threads):
    first = tiny_trainer(tmp_path, corpus, max_steps=4)
    first.run()
    assert first.progress.stop_reason == "max_steps" and first.progress.step == 4
    again = tiny_trainer(tmp_path, corpus)  # the same run, without the cap
    again.restore(Checkpoint.read(again.run_dir.last))
    assert again.progress.step == 4 and again.progress.batch_in_epoch == 1 and again.extend_if_asked()
    for name, weights in first.model.state_dict().items():
        assert torch.equal(again.model.state_dict()[name], weights)
    again.run()
    assert (again.progress.step, again.progress.epoch) == (6, 2)
    assert [r.step for r in again.progress.history] == [3, 4, 6]  # epoch 1, the cap, epoch 2


def test_a_run_started_from_a_parent_records_it_in_every_checkpoint(tmp_path, corpus, restored_threads):
    parent = tiny_trainer(tmp_path / "parent", corpus, epochs=1)
    parent.run()
    child = tiny_trainer(tmp_path / "child", corpus, epochs=1)
    record = {"from": "parent", "path": str(parent.run_dir.best), "sha256": "ab" * 32}
    child.start_from(Checkpoint.read(parent.run_dir.best).weights, record)
    assert torch.equal(child.model.state_dict()["generator.weight"], parent.model.state_dict()["generator.weight"])
    child.run()
    assert Checkpoint.read(child.run_dir.best).parent == record == Checkpoint.read(child.run_dir.last).parent


def test_a_stop_request_saves_the_resumable_state_then_exits_128_plus_its_signal(tmp_path, corpus, restored_threads):
    stop = GracefulStop()
    trainer = tiny_trainer(tmp_path, corpus, stop=stop)
    stop.signum = 15  # as the SIGTERM handler records it
    with pytest.raises(StoppedBySignal) as caught:
        trainer.run()
    assert caught.value.exit_code == 143
    assert str(caught.value) == (
        f"stopped by signal 15; state saved to {trainer.run_dir.last} (run the same command to resume)"
    )
    assert Checkpoint.read(trainer.run_dir.last).train_state is not None and not trainer.progress.finished
