"""config_retrain.py: the `train.retrain` section: read where a run starts and left out of run
identities (a nightly run's policy may change between its sessions), and the bounds of the
share of a replay night's new pairs held out for the gate."""

from __future__ import annotations

import pytest

from transformer_cli.config_loading import load_config
from transformer_cli.config_retrain import RetrainConfig
from transformer_cli.config_train import TrainConfig
from transformer_cli.config_values import ConfigError
from transformer_cli.errors import UsageError
from transformer_cli.training.run_dir import run_identity


def test_the_retrain_section_is_the_train_sections_and_left_out_of_run_identities():
    cfg = load_config("tiny.yaml", ["train.retrain.night=replay", "train.retrain.held_out_share=0.1"])
    assert isinstance(cfg.train.retrain, RetrainConfig) and cfg.train.retrain.held_out_share == 0.1
    assert run_identity(cfg, "data") == run_identity(load_config("tiny.yaml"), "data")
    assert isinstance(TrainConfig().retrain, RetrainConfig)


def test_the_held_out_share_its_cap_and_its_tolerance_have_their_bounds():
    rules = RetrainConfig()
    assert (rules.held_out_share, rules.held_out_max_pairs, rules.held_out_tolerance_loss) == (0.05, 1000, 0.05)
    with pytest.raises(UsageError, match=r"--set train.retrain.held_out_share=0.9 is out of range: must be <= 0.5"):
        load_config("tiny.yaml", ["train.retrain.held_out_share=0.9"])
    with pytest.raises(ConfigError, match=r"train.retrain.held_out_max_pairs=0 is out of range: must be >= 1"):
        RetrainConfig(held_out_max_pairs=0)
    with pytest.raises(ConfigError, match=r"train.retrain.held_out_tolerance_loss=-0.1 is out of range"):
        RetrainConfig(held_out_tolerance_loss=-0.1)
