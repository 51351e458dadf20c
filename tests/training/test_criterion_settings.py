"""training/criterion_settings.py: cross_entropy's settings, read from a config's
train.criterion_options (bounds checked there), and importable without torch."""

from __future__ import annotations

import pytest
from helpers import modules_after_loading

from transformer_cli.config_loading import load_config
from transformer_cli.config_values import ConfigError
from transformer_cli.seams import CRITERIA
from transformer_cli.training.criterion_settings import CrossEntropyOptions


def test_cross_entropy_reads_its_options_with_their_bounds():
    assert CRITERIA.settings_of("cross_entropy") is CrossEntropyOptions
    assert CRITERIA.options("cross_entropy", {"label_smoothing": 0.1}) == CrossEntropyOptions(0.1, 0.0)
    with pytest.raises(ConfigError, match=r"train.criterion_options.label_smoothing"):
        CRITERIA.options("cross_entropy", {"label_smoothing": 1.0})
    with pytest.raises(ConfigError, match=r"train.criterion_options.rdrop_alpha"):
        CrossEntropyOptions(rdrop_alpha=-1.0)


def test_a_config_giving_them_loads_without_torch():
    options = ["train.criterion_options.label_smoothing=0.1", "train.criterion_options.rdrop_alpha=5"]
    assert modules_after_loading(options, "torch") == [False]
    assert load_config("tiny.yaml", options).train.criterion_options["rdrop_alpha"] == 5
