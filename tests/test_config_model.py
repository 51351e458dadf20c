"""config_model.py: the `model:` section, read by the settings class of the architecture it names
(seams.ARCHITECTURES), the Transformer's by default."""

from __future__ import annotations

import pytest
from helpers import config_from_dict

from transformer_cli import config
from transformer_cli.config_model import ModelConfig, default_model
from transformer_cli.config_values import ConfigError
from transformer_cli.model.transformer_config import TransformerConfig


def test_the_model_section_is_read_by_its_architectures_settings_class():
    assert config.ModelConfig is ModelConfig
    assert ModelConfig.section_class({}) is TransformerConfig
    assert type(default_model()) is TransformerConfig and type(config.Config().model) is TransformerConfig
    with pytest.raises(ConfigError, match=r"model.architecture: unknown model architecture 'rnn' \(known: "):
        ModelConfig.section_class({"architecture": "rnn"})
    with pytest.raises(ConfigError, match=r"model.architecture must be a string \(got 3\)"):
        ModelConfig.section_class({"architecture": 3})


def test_the_settings_every_family_has_are_bounded():
    with pytest.raises(ConfigError, match="model.max_len"):
        config_from_dict({"model": {"max_len": 2}})
