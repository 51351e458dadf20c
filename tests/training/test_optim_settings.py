"""training/optim_settings.py: the settings of tfm's own optimizers and schedules, read from a
config's train.optimizer_options and train.schedule_options, and importable without torch."""

from __future__ import annotations

import pytest
from helpers import modules_after_loading

from transformer_cli.config_loading import load_config
from transformer_cli.config_values import ConfigError
from transformer_cli.seams import OPTIMIZERS, SCHEDULES
from transformer_cli.training.optim_settings import AdamOptions, InverseSqrtOptions


def test_adam_takes_two_betas_in_the_unit_interval():
    assert AdamOptions() == AdamOptions([0.9, 0.98], 1e-9, 0.0)
    with pytest.raises(ConfigError, match=r"train.optimizer_options.betas must be two numbers in \[0, 1\)"):
        AdamOptions(betas=[0.9, 1.0])
    with pytest.raises(ConfigError, match=r"betas must be two numbers"):
        AdamOptions(betas=[0.9])


def test_they_are_the_settings_the_registries_read_a_configs_options_with():
    assert OPTIMIZERS.settings_of("adam") is AdamOptions is OPTIMIZERS.settings_of("adamw")
    assert OPTIMIZERS.options("adamw", {"weight_decay": 0.01}) == AdamOptions(weight_decay=0.01)
    assert SCHEDULES.settings_of("inverse_sqrt") is InverseSqrtOptions
    assert SCHEDULES.options("inverse_sqrt", {"warmup_steps": 8}) == InverseSqrtOptions(8)
    with pytest.raises(ConfigError, match=r"train.schedule_options.warmup_steps"):
        SCHEDULES.options("inverse_sqrt", {"warmup_steps": 0})


def test_a_config_giving_them_loads_without_torch():
    options = ["train.optimizer=adamw", "train.optimizer_options.weight_decay=0.1"]
    options += ["train.schedule=inverse_sqrt", "train.schedule_options.warmup_steps=10"]
    assert modules_after_loading(options, "torch") == [False]
    cfg = load_config("tiny.yaml", ["train.optimizer_options.eps=1e-8"])
    assert OPTIMIZERS.options(cfg.train.optimizer, cfg.train.optimizer_options) == AdamOptions(eps=1e-8)
