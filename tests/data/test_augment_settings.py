"""data/augment_settings.py: source_noise's settings, read from a config's
train.transform_options.source_noise (shares checked there), and importable without torch."""

from __future__ import annotations

import pytest
from helpers import modules_after_loading

from transformer_cli.config_loading import load_config
from transformer_cli.config_values import ConfigError
from transformer_cli.data.augment_settings import SourceNoiseOptions
from transformer_cli.errors import UsageError
from transformer_cli.seams import TRANSFORMS


def test_the_shares_of_case_changes_add_up_to_one_at_most():
    assert SourceNoiseOptions(0.5, 0.5, 1.0).unpunctuated == 1.0
    with pytest.raises(ConfigError, match=r"source_noise.lowercase \+ uppercase must be at most 1"):
        SourceNoiseOptions(0.6, 0.5)
    assert TRANSFORMS.settings_of("source_noise") is SourceNoiseOptions


def test_a_config_gives_them_under_the_transforms_name():
    cfg = load_config("tiny.yaml", ["train.transform_options.source_noise.lowercase=0.2"])
    assert cfg.train.transform_options == {"source_noise": {"lowercase": 0.2}}
    with pytest.raises(UsageError, match=r"source_noise.lowercase"):
        load_config("tiny.yaml", ["train.transform_options.source_noise.lowercase=2"])


def test_reading_them_imports_no_torch():
    assert modules_after_loading(["train.transform_options.source_noise.uppercase=0.1"], "torch") == [False]
