"""config_sections.py: the schema's sections apart from `Config`, which the checks across keys
read through a Protocol (config_checks.Checked) instead of importing config.py back."""

from __future__ import annotations

from transformer_cli import config, config_sections
from transformer_cli.config_checks import Checked


def test_the_sections_are_config_s_and_a_config_is_what_the_checks_read():
    assert config.DataConfig is config_sections.DataConfig and config.DecodeConfig is config_sections.DecodeConfig
    cfg: Checked = config.Config()  # the Protocol's attributes are Config's fields
    assert type(cfg.model).__name__ == "TransformerConfig" and cfg.decode.beam_size == 1


def test_a_models_saved_decoding_leaves_out_the_glossary_of_the_config_that_trained_it() -> None:
    from transformer_cli.config_sections import saved_decode

    decode = saved_decode({"beam_size": 4, "glossary": "/where/it/was/trained/terms.tsv"})
    assert decode.beam_size == 4 and decode.glossary is None
