"""config_synthetic.py: the `synthetic:` section: on when either side names text, its search
choices and bounds, each key checked where the config is loaded."""

from __future__ import annotations

import pytest

from transformer_cli.config_loading import load_config
from transformer_cli.config_synthetic import BackTranslationConfig, ForwardTranslationConfig, SyntheticConfig
from transformer_cli.config_values import ConfigError
from transformer_cli.errors import UsageError


def test_it_is_on_when_either_side_names_text():
    assert not SyntheticConfig().enabled
    assert SyntheticConfig(back_translation=BackTranslationConfig(text=["parallel"])).enabled
    assert SyntheticConfig(forward_translation=ForwardTranslationConfig(text=["x"], teachers=["t.pt"])).enabled


def test_defaults_back_translate_by_sampling_with_the_reverse_run_and_a_tag():
    bt, ft = BackTranslationConfig(), ForwardTranslationConfig()
    assert (bt.model, bt.search, bt.tag) == ("reverse", "sample", True)
    assert (ft.combine, ft.tag, ft.teachers) == ("log", False, [])
    sc = SyntheticConfig()
    assert (sc.real_upsample, sc.seed, sc.reverse_recipe) == (1, 1, None)


def test_each_key_is_checked_where_the_config_is_loaded():
    cfg = load_config(
        "tiny.yaml",
        ["synthetic.back_translation.search=noised_beam", "synthetic.real_upsample=0", "synthetic.chunk_lines=10"],
    )
    assert (cfg.synthetic.back_translation.search, cfg.synthetic.real_upsample) == ("noised_beam", 0)
    assert load_config("tiny.yaml", ["synthetic.back_translation.search=greedy"])  # any decode.strategy
    for override, message in [
        (
            "synthetic.back_translation.search=shortest",
            r"synthetic.back_translation.search: unknown search strategy 'shortest' \(known: beam, greedy, sample",
        ),
        ("synthetic.real_upsample=1001", "is out of range: must be <= 1000"),
        ("synthetic.back_translation.sampling_temperature=0", "is out of range: must be > 0.0"),
        ("synthetic.forward_translation.combine=max", "must be one of 'log', 'prob'"),
        ("synthetic.back_translation.txt=[x]", "did you mean 'synthetic.back_translation.text'?"),
    ]:
        with pytest.raises(UsageError, match=message):
            load_config("tiny.yaml", [override])
    with pytest.raises(ConfigError, match="synthetic.back_translation.beam_size=0 is out of range"):
        BackTranslationConfig(beam_size=0)
