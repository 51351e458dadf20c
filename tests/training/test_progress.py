"""training/progress.py: the decisions the loop takes from where a run stands."""

from __future__ import annotations

import math
from dataclasses import asdict

from transformer_cli.config_train import TrainConfig
from transformer_cli.training.metrics import ValidationRecord
from transformer_cli.training.progress import Progress, may_continue, should_stop, validation_due_within_epoch


def test_should_stop_says_why_in_order_epochs_max_steps_patience():
    tc = TrainConfig(epochs=3, max_steps=100, patience=2)
    assert should_stop(Progress(epoch=3, step=100, bad_validations=2), tc, end_of_epoch=True) == "epochs"
    assert should_stop(Progress(epoch=3, step=50), tc, end_of_epoch=False) is None  # mid-epoch
    assert should_stop(Progress(epoch=1, step=100), tc, end_of_epoch=False) == "max_steps"
    assert should_stop(Progress(epoch=1, step=40, bad_validations=2), tc, True) == "early_stopping"
    assert should_stop(Progress(epoch=1, step=40, bad_validations=1), tc, True) is None
    assert should_stop(Progress(epoch=1, bad_validations=9), TrainConfig(epochs=3), True) is None


def test_validation_is_due_at_max_steps_and_every_valid_every_steps():
    assert validation_due_within_epoch(Progress(step=20), TrainConfig(valid_every=10))
    assert not validation_due_within_epoch(Progress(step=21), TrainConfig(valid_every=10))
    assert validation_due_within_epoch(Progress(step=17), TrainConfig(max_steps=17))
    assert not validation_due_within_epoch(Progress(step=17), TrainConfig())


def test_note_validation_tracks_the_best_and_the_validations_without_improvement():
    p = Progress(step=10)
    assert p.note_validation(2.0) and (p.best_valid_loss, p.best_step, p.bad_validations) == (2.0, 10, 0)
    p.step = 20
    assert not p.note_validation(2.0) and not p.note_validation(2.5) and p.bad_validations == 2
    assert p.note_validation(1.5) and (p.best_step, p.bad_validations) == (20, 0)


def test_finishing_schedules_averaging_only_when_configured():
    running = Progress()
    running.finish_if(None, average_last=5)
    assert not running.finished and not running.pending_average
    done = Progress()
    done.finish_if("epochs", average_last=5)
    assert done.finished and done.stop_reason == "epochs" and done.pending_average
    single = Progress()
    single.finish_if("max_steps", average_last=1)
    assert single.finished and not single.pending_average


def test_a_finished_run_continues_only_when_its_own_limit_was_raised():
    by_epochs = Progress(epoch=3, step=30, finished=True, stop_reason="epochs")
    assert may_continue(by_epochs, TrainConfig(epochs=4))
    assert not may_continue(by_epochs, TrainConfig(epochs=3))
    by_steps = Progress(step=30, finished=True, stop_reason="max_steps")
    assert may_continue(by_steps, TrainConfig(max_steps=40)) and may_continue(by_steps, TrainConfig())
    assert not may_continue(by_steps, TrainConfig(max_steps=30))
    stopped_early = Progress(epoch=3, finished=True, stop_reason="early_stopping")
    assert not may_continue(stopped_early, TrainConfig(epochs=10))


def test_progress_of_older_and_newer_checkpoints_loads():
    record = ValidationRecord(
        epoch=1,
        end_of_epoch=True,
        step=7,
        train_loss=2.0,
        train_ppl=7.39,
        valid_loss=1.25,
        valid_ppl=3.49,
        lr=1e-3,
        tokens_per_s=900.0,
        elapsed_s=3.0,
    )
    progress = Progress(step=7, epoch=1, best_valid_loss=1.25, history=[record])
    saved = asdict(progress)  # as last.pt holds it: plain data
    assert saved["history"][0]["valid_loss"] == 1.25
    assert Progress.from_dict(saved) == progress
    older = {k: v for k, v in saved.items() if k != "pending_average"}  # a field added later
    newer = {**saved, "some_future_field": 1}
    assert Progress.from_dict(older).pending_average is False
    assert Progress.from_dict(newer) == Progress.from_dict(saved)
    assert math.isinf(Progress().best_valid_loss)


def test_none_is_none_and_older_last_pts_empty_strings_read_as_none():
    fresh = Progress()
    assert fresh.pending_validation is None and fresh.stop_reason is None
    older = {**asdict(fresh), "pending_validation": "", "stop_reason": ""}  # as written before
    assert Progress.from_dict(older) == fresh
    assert Progress.from_dict(asdict(Progress(stop_reason="epochs"))).stop_reason == "epochs"
