"""inference/strategy_settings.py: sample's settings, read from a config's
decode.strategy_options (bounds and n_best checked there), and importable without torch."""

from __future__ import annotations

import pytest
from helpers import modules_after_loading

from transformer_cli.config_loading import load_config
from transformer_cli.config_values import ConfigError
from transformer_cli.errors import UsageError
from transformer_cli.inference.strategy_settings import SamplingOptions
from transformer_cli.seams import SEARCH_STRATEGIES


def test_sampling_reads_its_options_with_their_bounds():
    assert SEARCH_STRATEGIES.settings_of("sample") is SamplingOptions
    assert SEARCH_STRATEGIES.options("sample", {"topk": 5, "seed": 1}) == SamplingOptions(5, 1.0, 1)
    with pytest.raises(ConfigError, match=r"decode.strategy_options.temperature"):
        SEARCH_STRATEGIES.options("sample", {"temperature": 0.0})


def test_a_config_asking_for_more_translations_than_a_draw_gives_is_refused():
    cfg = load_config("tiny.yaml", ["decode.strategy=sample", "decode.strategy_options.topk=5"])
    assert cfg.decode.strategy_options == {"topk": 5}
    with pytest.raises(UsageError, match=r"decode.n_best"):
        load_config("tiny.yaml", ["decode.strategy=sample", "decode.beam_size=2", "decode.n_best=2"])


def test_reading_them_imports_no_torch():
    options = ["decode.strategy=sample", "decode.strategy_options.temperature=0.5"]
    assert modules_after_loading(options, "torch") == [False]
