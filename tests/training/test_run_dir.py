"""training/run_dir.py: a run's identity decides whether the next `tfm train` resumes it or
starts over: it must not change when tfm adds a config key whose default keeps the old
behaviour, nor with the keys a run may change between sessions; and the run directory: its
lock (a second holder is busy, exit 75), its log and its metrics."""

from __future__ import annotations

import logging

import pytest

from transformer_cli.config import Config
from transformer_cli.config_loading import load_config
from transformer_cli.errors import BusyError
from transformer_cli.training.metrics import ValidationRecord
from transformer_cli.training.run_dir import RESUMABLE_CHANGES, RunDir, run_identity


def test_the_identity_of_a_run_is_the_one_earlier_versions_computed():
    # Pinned from tfm ea3b6f1, before model.architecture, scale_embeddings, output_bias, sinusoid_layout
    # and train.init_from/continued existed: a finished run of then is still finished now.
    assert run_identity(Config(), "data") == "b39136344ab34f525894560a471e991818ab4fd7a1859a769b9ab633b18cbbcd"
    base = "c5f4112dbec3a3639564fd258b4fe0d7d4480fa0f64ff49457574b64fd97aa56"
    assert run_identity(load_config("base.yaml"), "data") == base


def test_a_new_key_set_away_from_its_default_changes_the_identity():
    cfg = Config()
    before = run_identity(cfg, "data")
    cfg.model.output_bias = True
    assert run_identity(cfg, "data") != before


def test_what_a_run_may_change_between_sessions_keeps_its_identity_its_parent_does_not():
    cfg = Config()
    before = run_identity(cfg, "data")
    cfg.train.epochs, cfg.train.patience, cfg.train.device = 50, 3, "cpu"
    assert {"epochs", "patience", "device"} <= RESUMABLE_CHANGES
    assert run_identity(cfg, "data") == before
    cfg.train.init_from = "published"  # the parent joins as its lineage, only when given
    assert run_identity(cfg, "data") == before
    assert run_identity(cfg, "data", {"init_from": "published", "tokenizers": "x"}) != before
    assert run_identity(cfg, "other data") != before
    cfg.train.lr = 1e-3
    assert run_identity(cfg, "data") != before


def test_a_run_is_locked_by_one_holder_at_a_time(tmp_path):
    first, second = RunDir(tmp_path / "run"), RunDir(tmp_path / "run")
    first.lock()
    try:
        assert first.locked and not second.locked and first.path.is_dir()
        assert first.lock_file.read_text().strip().isdigit()  # the holder's pid
        with pytest.raises(BusyError, match=r"run .*run is busy: another tfm train holds its lock \(pid \d+\)"):
            second.lock()
        assert BusyError.exit_code == 75
    finally:
        first.unlock()
    second.lock()  # released: the next one takes it
    assert second.locked
    second.unlock()
    assert not second.locked


def test_the_log_and_the_metrics_of_a_run(tmp_path):
    run = RunDir(tmp_path / "run")
    run.create()
    logger = logging.getLogger("tfm-test-run-dir")
    handler = run.attach_log(logger)
    try:
        logger.info("epoch %d done", 3)
    finally:
        logger.removeHandler(handler)
        handler.close()
    assert run.log.read_text().rstrip().endswith("INFO epoch 3 done")
    assert run.read_metrics() == []
    record = ValidationRecord(
        epoch=1,
        end_of_epoch=True,
        step=10,
        train_loss=2.0,
        train_ppl=7.389,
        valid_loss=1.9,
        valid_ppl=6.686,
        lr=1e-3,
        tokens_per_s=100.0,
        elapsed_s=3.0,
    )
    run.write_metrics([record])
    assert run.read_metrics() == [record] and run.metrics.name == "metrics.jsonl"
