"""data/loader.py: TrainingData, the loop's batches: an epoch's plan (a function of the seed
and the epoch, planned ahead in the background), this rank's share of it, optimizer steps of
train.accumulate batches, the same batches whatever the number of DataLoader workers or the
step a session starts at; a worker that died, or ids past the vocabulary, one line."""

from __future__ import annotations

import numpy as np
import pytest
from data.test_augment import _config, _data, _epoch, _same

from transformer_cli.data.augment import Augmentation
from transformer_cli.data.loader import TrainingData, default_workers
from transformer_cli.data.preprocess import prepare
from transformer_cli.errors import TfmError
from transformer_cli.host.machine import available_cpus


def test_the_number_of_workers_changes_no_batch(tmp_path, corpus_dir):
    """Source noise (and the batch plan) follow (seed, epoch, batch) only. Subword sampling
    is SentencePiece's and not seedable per call, so it is left out here."""
    cfg = _config(
        tmp_path,
        corpus_dir,
        transform_options={"source_noise": {"lowercase": 0.3, "uppercase": 0.1, "unpunctuated": 0.3}},
        accumulate=2,
    )
    prepared, _ = prepare(cfg)
    alone = _epoch(_data(cfg, prepared, workers=0), 1)
    assert _same(alone, _epoch(_data(cfg, prepared, workers=2), 1))
    # a restart in the middle of the epoch sees the batches the whole epoch would have
    data = _data(cfg, prepared, workers=1)
    later = [b for group in data.steps_from(1, 3) for b in group]
    assert _same(alone[6:], later)


def test_the_next_epoch_is_planned_in_the_background_as_it_would_be_at_once(tmp_path, corpus_dir, monkeypatch):
    import threading

    started = []

    class Recorded(threading.Thread):
        def start(self):
            started.append(self.name)
            super().start()

    monkeypatch.setattr(threading, "Thread", Recorded)
    cfg = _config(tmp_path, corpus_dir, epochs=2)
    prepared, _ = prepare(cfg)
    data, fresh = _data(cfg, prepared), _data(cfg, prepared)
    _epoch(data, 0)
    assert "plan-epoch-1" in started  # epoch 2 (index 1) was planned while epoch 1 ran
    assert [list(i) for s in range(data.steps(1)) for i in data.step_indices(1, s)] == [
        list(i) for s in range(fresh.steps(1)) for i in fresh.step_indices(1, s)
    ]
    _epoch(data, 1)
    assert "plan-epoch-2" not in started  # nothing is planned past train.epochs


def test_each_rank_takes_every_world_size_th_batch_of_the_same_plan(tmp_path, corpus_dir):
    cfg = _config(tmp_path, corpus_dir, batch_size=16)
    prepared, _ = prepare(cfg)
    split, aug = prepared.split("train"), Augmentation.from_config(cfg, prepared.tokenizers)
    cfg.train.data_workers = 0
    whole = TrainingData(cfg, split, aug)
    ranks = [TrainingData(cfg, split, aug, rank=r, world_size=2) for r in range(2)]
    plan = [list(i) for s in range(whole.steps(0)) for i in whole.step_indices(0, s)]
    shares = [[list(i) for s in range(d.steps(0)) for i in d.step_indices(0, s)] for d in ranks]
    assert shares[0] == plan[0 : len(plan) // 2 * 2 : 2] and shares[1] == plan[1 : len(plan) // 2 * 2 : 2]
    assert plan != [list(i) for s in range(whole.steps(1)) for i in whole.step_indices(1, s)]  # epochs differ


def test_a_step_holds_train_accumulate_batches(tmp_path, corpus_dir):
    cfg = _config(tmp_path, corpus_dir, batch_size=16, accumulate=3)
    prepared, _ = prepare(cfg)
    data = _data(cfg, prepared)
    batches = -(-300 // 16)
    assert data.steps(0) == -(-batches // 3)
    groups = list(data.steps_from(0, 0))
    assert [len(g) for g in groups] == [3] * (batches // 3) + ([batches % 3] if batches % 3 else [])


def test_workers_default_to_the_cpus_training_leaves_free():
    assert default_workers(available_cpus()) == 1  # at least one
    assert default_workers(0) == min(4, available_cpus())  # at most four


def test_a_dead_worker_or_ids_past_the_vocabulary_are_one_line(tmp_path, corpus_dir):
    cfg = _config(tmp_path, corpus_dir)
    prepared, _ = prepare(cfg)
    data = _data(cfg, prepared)
    assert data.worker_failure(ValueError("not a worker's")) is None
    died = data.worker_failure(RuntimeError("DataLoader worker (pid 123) is killed by signal: Killed."))
    assert isinstance(died, TfmError) and str(died).startswith("a data worker process died (DataLoader worker")
    assert data.worker_failure(RuntimeError("a step's own error")) is None
    for mid_batch in (EOFError(), ConnectionResetError(104, "Connection reset by peer")):  # the pipe, cut
        assert str(data.worker_failure(mid_batch)).startswith("a data worker process died")
    batch = next(iter(data.steps_from(0, 0)))[0]
    batch.src[0, 0] = prepared.tokenizers.src.vocab_size  # as a shard changed after it was written
    with pytest.raises(TfmError, match=r"token ids past the vocabulary: .*tfm preprocess -c .* --verify"):
        data._check_ids([batch], np.arange(len(batch.src)))
