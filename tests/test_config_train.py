"""config_train.py: the `train:` section: which keys may change between sessions of a run
(resumable), train.continued's values for a run that starts from a trained model (null: the
train.* value), and the device, precision and promotion choices every option taking them
shares (the Python API and the CLI check against the same tuples)."""

from __future__ import annotations

import dataclasses

import pytest

from transformer_cli.api import open_backend
from transformer_cli.config_loading import load_config
from transformer_cli.config_train import DEVICES, PRECISIONS, PROMOTE_POLICIES, ContinuedConfig, TrainConfig
from transformer_cli.config_values import ConfigError
from transformer_cli.errors import UsageError


def resumable() -> set[str]:
    return {f.name for f in dataclasses.fields(TrainConfig) if f.metadata.get("resumable")}


def test_what_shapes_the_model_or_its_data_is_not_resumable_what_runs_it_is():
    keys = resumable()
    assert {"epochs", "max_steps", "device", "precision", "threads", "patience", "promote"} <= keys
    assert not {"lr", "batch_size", "batch_tokens", "optimizer", "seed", "criterion_options"} & keys


def test_the_choices_are_named_once():
    assert DEVICES == ("auto", "cpu", "cuda", "mps") and PRECISIONS == ("auto", "fp32", "bf16", "fp16")
    assert PROMOTE_POLICIES == ("if-better", "always", "never")
    with pytest.raises(ConfigError, match=r"train.device must be one of 'auto', 'cpu', 'cuda', 'mps' \(got 'tpu'\)"):
        TrainConfig(device="tpu")
    with pytest.raises(UsageError, match="tpu"):  # the Python API refuses it before opening anything
        open_backend("no-such-model.pt", device="tpu")


def test_continued_values_default_to_the_train_values_and_have_their_bounds():
    assert all(getattr(ContinuedConfig(), f.name) in (None, {}) for f in dataclasses.fields(ContinuedConfig))
    cfg = load_config("tiny.yaml", ["train.continued.lr=1e-4", "train.continued.epochs=2"])
    assert (cfg.train.continued.lr, cfg.train.continued.epochs) == (1e-4, 2)
    with pytest.raises(UsageError, match=r"--set train.continued.epochs=0 is out of range: must be >= 1"):
        load_config("tiny.yaml", ["train.continued.epochs=0"])
    with pytest.raises(ConfigError, match=r"train.continued.lr=0.0 is out of range: must be > 0"):
        ContinuedConfig(lr=0.0)


def test_threads_are_a_count_auto_or_null():
    assert TrainConfig(threads="auto").threads == "auto" and TrainConfig(threads=None).threads is None
    assert load_config("tiny.yaml", ["train.threads=2"]).train.threads == 2
    with pytest.raises(UsageError, match="train.threads"):
        load_config("tiny.yaml", ["train.threads=many"])
