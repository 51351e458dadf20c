"""config_values.py: YAML values made typed fields (coercion, bounds, unknown keys with a
suggestion), `--set` overrides with the same checks, and the helpers the schema is built
with (lookup, as_before); every problem a ConfigError naming its key."""

from __future__ import annotations

import pytest
from helpers import config_from_dict

from transformer_cli.config import Config, DecodeConfig, TokenizerConfig
from transformer_cli.config_loading import load_config
from transformer_cli.config_values import (
    ConfigError,
    apply_override,
    as_before,
    build_section,
    checks_deferred,
    lookup,
)
from transformer_cli.errors import UsageError


def write(tmp_path, text: str, name: str = "c.yaml") -> str:
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def test_overrides_are_typed(tmp_path):
    cfg = load_config(
        "tiny.yaml",
        [
            "train.lr=3e-4",
            "model.tie_output=false",
            "train.patience=3",
            "data.splits.train=mytrain",
            "train.optimizer_options.betas=[0.8, 0.9]",
        ],
    )
    assert cfg.train.lr == 3e-4 and isinstance(cfg.train.lr, float)
    assert cfg.model.tie_output is False and cfg.train.patience == 3
    assert cfg.data.splits.train == "mytrain" and cfg.train.optimizer_options["betas"] == [0.8, 0.9]
    assert load_config("tiny.yaml", ["train.patience=null"]).train.patience is None


def test_scientific_notation_in_yaml_is_a_float(tmp_path):
    # PyYAML reads "5e-4" as a string; the schema still types it as a number.
    assert load_config(write(tmp_path, "train:\n  lr: 5e-4\n")).train.lr == 5e-4


@pytest.mark.parametrize(
    "override, message",
    [
        ("train.foo=1", "--set train.foo: unknown key 'train.foo'"),
        ("train.lr=abc", "--set train.lr must be a number (got 'abc')"),
        ("train.lr=-1", "--set train.lr=-1.0 is out of range"),
        ("model.d_model.x=1", "'model.d_model' has no sub-keys"),
        ("train.lr", "expected KEY=VALUE"),
    ],
)
def test_bad_override(override, message):
    with pytest.raises(UsageError) as err:
        load_config("tiny.yaml", [override])
    assert message in str(err.value)


def test_sections_made_in_python_are_checked_as_yaml_would_be():

    from transformer_cli.config_train import TrainConfig
    from transformer_cli.model.transformer_config import TransformerConfig

    with pytest.raises(ConfigError, match=r"train.lr=-1.0 is out of range: must be > 0"):
        TrainConfig(lr=-1.0)
    with pytest.raises(ConfigError, match=r"decode.beam_size must be an integer \(got '5'\)"):
        DecodeConfig(beam_size="5")
    with pytest.raises(ConfigError, match=r"model.dropout must be a number"):
        TransformerConfig(dropout=None)
    with pytest.raises(ConfigError, match="model.n_heads=5 must divide model.d_model=256"):
        Config(model=TransformerConfig(n_heads=5))  # the checks across keys too
    with pytest.raises(ConfigError, match=r"tokenizer.kind: unknown tokenizer kind 'bpe' \(known: "):
        config_from_dict({"tokenizer": {"kind": "bpe"}})
    assert TrainConfig(lr=1).lr == 1  # an int where a float is expected is fine


def test_values_are_coerced_to_their_fields_types_and_each_problem_names_its_key():
    built = build_section(
        DecodeConfig,
        {"beam_size": "4", "length_penalty": 1, "ensemble": ["a.pt"], "ensemble_weights": "null"},
        "decode",
    )
    assert (built.beam_size, built.length_penalty, built.ensemble, built.ensemble_weights) == (4, 1.0, ["a.pt"], None)
    assert isinstance(built.length_penalty, float)
    for raw, message, keys in [
        ({"beam_size": True}, "decode.beam_size must be an integer (got True)", ("decode.beam_size",)),
        ({"length_penalty": "inf"}, "decode.length_penalty must be a finite number (got 'inf')", None),
        ({"ensemble": "a.pt"}, "decode.ensemble must be a list (got 'a.pt')", None),
        ({"ensemble": ["a.pt", 3]}, "decode.ensemble[1] must be a string (got 3)", ("decode.ensemble[1]",)),
        ({"beam_sise": 4}, "unknown key 'decode.beam_sise' (did you mean 'decode.beam_size'?)", None),
        ({"zzz": 4}, "unknown key 'decode.zzz' (known: ", ("decode.zzz",)),
        ([1], "decode must be a mapping (got [1])", ("decode",)),
    ]:
        with pytest.raises(ConfigError) as caught:
            build_section(DecodeConfig, raw, "decode")
        assert str(caught.value).startswith(message)
        assert isinstance(caught.value, UsageError)  # exit 2 on the command line
        if keys is not None:
            assert caught.value.keys == keys


def test_an_override_reaches_an_entrys_own_options_and_names_the_key_it_set():
    cfg = Config()
    assert apply_override(cfg, "tokenizer.options.alpha=0.5") == "tokenizer.options.alpha"
    assert cfg.tokenizer.options == {"alpha": 0.5}  # checked with the config, by the entry's settings
    assert apply_override(cfg, " decode.beam_size = 3") == "decode.beam_size"
    assert cfg.decode.beam_size == 3
    assert apply_override(cfg, "decode.ensemble_weights=null") == "decode.ensemble_weights"
    assert cfg.decode.ensemble_weights is None
    with pytest.raises(UsageError, match=r"^--set decode.ensemble must be a list \(got ''\)$"):
        apply_override(cfg, "decode.ensemble=")


def test_lookup_reads_a_dotted_key():
    cfg = load_config("tiny.yaml", ["train.lr=2e-3"])
    assert lookup(cfg, "train.lr") == 2e-3 and lookup(cfg, "data.splits.train") == cfg.data.splits.train
    with pytest.raises(AttributeError):
        lookup(cfg, "train.nope")


def test_as_before_leaves_out_the_keys_added_later_at_their_default():
    section = TokenizerConfig()
    before = as_before(section)
    assert "options" not in before and before["kind"] == section.kind  # added later, at its default
    assert as_before(TokenizerConfig(options={"alpha": 1}))["options"] == {"alpha": 1}
    assert "architecture" not in as_before(Config().model)  # (model.architecture: added too)
    assert "corpus_options" not in as_before(Config().data) and "splits" in as_before(Config().data)
    assert isinstance(as_before(Config().data)["splits"], dict)  # nested sections as plain data


def test_checks_across_keys_wait_for_the_block_to_end():
    raw = {"model": {"n_heads": 5}}
    with checks_deferred():
        cfg = config_from_dict(raw)  # built: the loader validates once its overrides are in
    assert cfg.model.n_heads == 5
    with pytest.raises(ConfigError, match="must divide"):
        config_from_dict(raw)
