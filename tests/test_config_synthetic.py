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
    assert (sc.real_weight, sc.seed, sc.reverse_recipe) == (1, 1, None)


def test_each_key_is_checked_where_the_config_is_loaded():
    cfg = load_config(
        "tiny.yaml",
        ["synthetic.back_translation.search=noised_beam", "synthetic.real_weight=0", "synthetic.chunk_lines=10"],
    )
    assert (cfg.synthetic.back_translation.search, cfg.synthetic.real_weight) == ("noised_beam", 0)
    assert load_config("tiny.yaml", ["synthetic.back_translation.search=greedy"])  # any decode.strategy
    for override, message in [
        (
            "synthetic.back_translation.search=shortest",
            r"synthetic.back_translation.search: unknown search strategy 'shortest' \(known: beam, greedy, sample",
        ),
        ("synthetic.real_weight=1001", "is out of range: must be <= 1000"),
        ("synthetic.back_translation.sampling_temperature=0", "is out of range: must be > 0.0"),
        ("synthetic.forward_translation.combine=max", "must be one of 'log', 'prob'"),
        ("synthetic.back_translation.txt=[x]", "did you mean 'synthetic.back_translation.text'?"),
    ]:
        with pytest.raises(UsageError, match=message):
            load_config("tiny.yaml", [override])
    with pytest.raises(ConfigError, match="synthetic.back_translation.beam_size=0 is out of range"):
        BackTranslationConfig(beam_size=0)


def _written(tmp_path, back: str) -> str:
    """A config extending tiny.yaml whose back-translation section is the YAML lines `back`."""
    path = tmp_path / "bt.yaml"
    path.write_text("extends: tiny.yaml\nsynthetic:\n  back_translation:\n" + back)
    return str(path)


def _refusal(spec: str, overrides: list[str] | None = None) -> str:
    with pytest.raises(UsageError) as refused:
        load_config(spec, overrides)
    return str(refused.value)


def test_the_search_has_its_own_options_checked_by_the_strategys_settings(tmp_path):
    """synthetic.back_translation.search names a search strategy as decode.strategy does, and
    search_options are that strategy's settings, as decode.strategy_options are decode's."""
    path = _written(tmp_path, "    search: sample\n    search_options: {topk: 5, temperature: 0.5}\n")
    assert load_config(path).synthetic.back_translation.search_options == {"topk": 5, "temperature": 0.5}
    assert _refusal(_written(tmp_path, "    search_options: {width: 5}\n")) == (
        f"{path}:4: unknown key 'synthetic.back_translation.search_options.width' (known: topk, temperature, seed)"
    )
    assert _refusal(_written(tmp_path, "    search_options: {temperature: 0}\n")).endswith(
        "synthetic.back_translation.search_options.temperature=0.0 is out of range: must be > 0.0"
    )
    for search in ("beam", "noised_beam", "greedy"):  # noised_beam: beam's settings (none)
        assert _refusal(_written(tmp_path, f"    search: {search}\n    search_options: {{topk: 5}}\n")) == (
            f"{path}:5: synthetic.back_translation.search_options: the search strategy "
            f"{'beam' if search == 'noised_beam' else search!r} takes no options (got topk)"
        )
    assert _refusal("tiny.yaml", ["synthetic.back_translation.search=noised-beam"]).endswith(
        "synthetic.back_translation.search: unknown search strategy 'noised-beam' "
        "(known: beam, greedy, sample, auto, noised_beam)"
    )


def test_a_seed_among_the_search_options_is_refused_for_synthetic_seed(tmp_path):
    path = _written(tmp_path, "    search_options: {seed: 3}\n")
    assert _refusal(path) == (
        f"{path}:4: synthetic.back_translation.search_options.seed: the draws are seeded by synthetic.seed "
        "(one seed per chunk, whichever run translates it): set that"
    )


def test_the_old_sampling_keys_read_into_search_options_with_a_warning_naming_their_line(tmp_path, caplog):
    path = _written(tmp_path, "    sampling_topk: 10\n    sampling_temperature: 0.7\n")
    with caplog.at_level("WARNING"):
        old = load_config(path)
    new = load_config("tiny.yaml", ["synthetic.back_translation.search_options={topk: 10, temperature: 0.7}"])
    assert old.synthetic.back_translation == new.synthetic.back_translation
    assert [r.getMessage() for r in caplog.records] == [
        f"warning: {path}:4: synthetic.back_translation.sampling_topk is now "
        "synthetic.back_translation.search_options.topk (the old name is read until a later release)",
        f"warning: {path}:5: synthetic.back_translation.sampling_temperature is now "
        "synthetic.back_translation.search_options.temperature (the old name is read until a later release)",
    ]
    caplog.clear()
    with caplog.at_level("WARNING"):
        cfg = load_config("tiny.yaml", ["synthetic.back_translation.sampling_topk=3"])
    assert cfg.synthetic.back_translation.search_options == {"topk": 3}
    assert "--set synthetic.back_translation.sampling_topk=3: synthetic.back_translation.sampling_topk is now" in (
        caplog.text
    )


def test_an_old_sampling_key_beside_a_search_without_it_is_dropped_with_a_warning(tmp_path, caplog):
    """Before, the sampling keys were read by sample alone (beam ignored them): still accepted."""
    path = _written(tmp_path, "    search: noised_beam\n    sampling_topk: 10\n")
    with caplog.at_level("WARNING"):
        cfg = load_config(path)
    assert cfg.synthetic.back_translation.search_options == {}
    assert [r.getMessage() for r in caplog.records] == [
        f"warning: {path}:5: synthetic.back_translation.sampling_topk is ignored: the search strategy "
        "'beam' has no setting 'topk' (drop it)"
    ]
    both = _written(tmp_path, "    sampling_topk: 10\n    search_options: {topk: 5}\n")
    assert _refusal(both).endswith(
        "synthetic.back_translation.sampling_topk is the old name of "
        "synthetic.back_translation.search_options.topk: give synthetic.back_translation.search_options.topk alone"
    )
