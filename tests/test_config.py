from pathlib import Path

import pytest
import yaml

from transformer_cli.config import Config
from transformer_cli.config_loading import config_from_dict, load_config, packaged_configs, resolve_config_path
from transformer_cli.errors import UsageError


def write(tmp_path: Path, text: str, name: str = "c.yaml") -> str:
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def test_shipped_configs_load_and_validate():
    shipped = packaged_configs()
    assert {"base.yaml", "seed.yaml", "tiny.yaml"} <= set(shipped)
    for name in shipped:
        assert load_config(name).name == Path(name).stem


def test_bare_name_resolves_to_configs_folder_then_package(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    shipped = resolve_config_path("seed.yaml")  # not in ./configs here: the packaged copy
    assert shipped.name == "seed.yaml" and shipped.is_file()
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "seed.yaml").write_text("model: {d_model: 64, n_heads: 2}\n")
    assert resolve_config_path("seed") == Path("configs/seed.yaml")
    assert load_config("seed").model.d_model == 64


def test_seed_matches_the_notebook_recipe():
    cfg = load_config("seed.yaml")
    m, t, tr = cfg.model, cfg.tokenizer, cfg.train
    assert (t.kind, t.lowercase, t.min_freq) == ("spacy", True, 2)
    assert (m.n_encoder_layers, m.n_decoder_layers, m.d_model, m.n_heads, m.d_ff) == (3, 3, 256, 8, 512)
    assert (m.dropout, m.positional, m.max_len) == (0.1, "learned", 100)
    assert (tr.optimizer, tr.lr, tr.clip_norm, tr.batch_size, tr.epochs) == ("adam", 5e-4, 1.0, 128, 10)
    assert tr.label_smoothing == 0.0 and tr.schedule == "constant"


def test_overrides_are_typed(tmp_path):
    cfg = load_config(
        "tiny.yaml",
        [
            "train.lr=3e-4",
            "model.tie_output=false",
            "train.patience=3",
            "data.splits.train=mytrain",
            "train.betas=[0.8, 0.9]",
        ],
    )
    assert cfg.train.lr == 3e-4 and isinstance(cfg.train.lr, float)
    assert cfg.model.tie_output is False and cfg.train.patience == 3
    assert cfg.data.splits.train == "mytrain" and cfg.train.betas == [0.8, 0.9]
    assert load_config("tiny.yaml", ["train.patience=null"]).train.patience is None


def test_resolved_config_round_trips():
    cfg = load_config("base.yaml", ["train.lr=1e-3"])
    again = config_from_dict(yaml.safe_load(cfg.to_yaml()))
    assert again == cfg


def test_scientific_notation_in_yaml_is_a_float(tmp_path):
    # PyYAML reads "5e-4" as a string; the schema still types it as a number.
    assert load_config(write(tmp_path, "train:\n  lr: 5e-4\n")).train.lr == 5e-4


@pytest.mark.parametrize(
    "text, message",
    [
        ("model:\n  d_model: 256\n   n_heads: 8\n", "c.yaml:3: YAML syntax error"),
        ("model:\n  n_head: 8\n", "unknown key 'model.n_head' (did you mean 'model.n_heads'?)"),
        ("modle:\n  n_heads: 8\n", "unknown key 'modle' (did you mean 'model'?)"),
        ("model:\n  d_model: abc\n", "model.d_model must be an integer (got 'abc')"),
        ("model:\n  n_heads: 7\n", "model.n_heads=7 must divide model.d_model=256"),
        ("model:\n  dropout: 1.5\n", "model.dropout=1.5 is out of range: must be < 1.0"),
        ("model:\n  positional: rotary\n", "model.positional must be one of 'learned', 'sinusoidal'"),
        ("train:\n  batch_size: null\n", "set train.batch_size (sentences) or train.batch_tokens"),
        ("tokenizer:\n  kind: spacy\nmodel:\n  share_embeddings: true\n", "needs a joint vocabulary"),
        ("- a\n- b\n", "must be a YAML mapping"),
    ],
)
def test_bad_config_is_one_line_naming_the_key(tmp_path, text, message):
    with pytest.raises(UsageError) as err:
        load_config(write(tmp_path, text))
    assert message in str(err.value) and "\n" not in str(err.value)


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


def test_missing_config_names_where_it_looked():
    with pytest.raises(UsageError, match="config file not found: 'nope.yaml'.*base.yaml"):
        load_config("nope.yaml")


def test_defaults_are_a_valid_config():
    cfg = Config()
    assert config_from_dict(cfg.to_dict()) == cfg


def test_extends_states_only_the_differences(tmp_path):
    best, base = load_config("best.yaml"), load_config("base.yaml")
    assert best.name == "best" and (best.train.epochs, best.train.average_last) == (18, 12)
    assert best.train.lr == base.train.lr == 1e-3
    assert best.train.snapshot_every_steps == base.train.snapshot_every_steps == 130
    assert best.model == base.model and best.tokenizer == base.tokenizer and best.decode == base.decode
    write(tmp_path, "model: {d_model: 64, n_heads: 2}\ntrain: {lr: 1.0e-3, epochs: 3}\n", "p.yaml")
    child = write(tmp_path, "extends: p.yaml\ntrain: {epochs: 5}\n", "c.yaml")
    cfg = load_config(child)
    assert (cfg.name, cfg.model.d_model, cfg.train.lr, cfg.train.epochs) == ("c", 64, 1e-3, 5)
    loop_a = write(tmp_path, "extends: b.yaml\n", "a.yaml")
    write(tmp_path, "extends: a.yaml\n", "b.yaml")
    with pytest.raises(UsageError, match="extends a.yaml makes a cycle"):
        load_config(loop_a)
    with pytest.raises(UsageError, match="extends must be a config file name"):
        load_config(write(tmp_path, "extends: [x]\n", "bad.yaml"))


def _error(spec: str, overrides: list[str] | None = None) -> str:
    with pytest.raises(UsageError) as err:
        load_config(spec, overrides)
    assert "\n" not in str(err.value)
    return str(err.value)


def test_errors_name_the_file_and_line_that_gave_the_value(tmp_path):
    p = tmp_path / "p.yaml"
    p.write_text("train: {lr: 1.0e-3}\n")
    child = write(tmp_path, "extends: p.yaml\ntrain: {epochs: 5}\nmodel:\n  dropout: 1.5\n")
    assert _error(child) == f"{child}:4: model.dropout=1.5 is out of range: must be < 1.0"
    for parent, message in [
        ("train: {lr: 1.0e-3}\nmodle:\n  n_heads: 8\n", "3: unknown key 'modle' (did you mean 'model'?)"),
        ("model:\n  d_model: 64\n  n_head: 8\n", "4: unknown key 'model.n_head' (did you mean 'model.n_heads'?)"),
        ("model:\n  d_model: abc\n", "3: model.d_model must be an integer (got 'abc')"),
        ("train:\n  betas: [0.9, x]\n", "3: train.betas[1] must be a number (got 'x')"),
    ]:
        p.write_text("# the parent\n" + parent)
        child = write(tmp_path, "extends: p.yaml\ntrain: {epochs: 5}\n")
        assert _error(child) == f"{p}:{message}"


def test_checks_across_keys_name_every_place_that_set_them(tmp_path):
    write(tmp_path, "model:\n  n_heads: 7\n", "p.yaml")
    child = write(tmp_path, "extends: p.yaml\nmodel:\n  d_model: 64\n")
    message = "model.n_heads={} must divide model.d_model={}"
    assert _error(child) == f"{tmp_path / 'p.yaml'}:2, {child}:3: " + message.format(7, 64)
    alone = write(tmp_path, "model:\n  n_heads: 8\n", "alone.yaml")
    assert _error(alone, ["model.n_heads=7"]) == "--set model.n_heads=7: " + message.format(7, 256)
    assert _error(
        alone, ["model.n_heads=6", "model.d_model=100"]
    ) == "--set model.n_heads=6, --set model.d_model=100: " + message.format(6, 100)
    assert _error(child, ["model.n_heads=5"]) == f"--set model.n_heads=5, {child}:3: " + message.format(5, 64)


def test_a_missing_parent_names_the_extends_line_and_every_folder_searched(tmp_path, monkeypatch):
    child = write(tmp_path, "# starts from\nextends: nope.yaml\n")
    monkeypatch.chdir(tmp_path.parent)
    assert _error(child).startswith(
        f"{child}:2: extends: config file not found: 'nope.yaml' "
        f"(looked in {tmp_path}, ., configs and the configs shipped "
        "with tfm: base.yaml, "
    )
    write(tmp_path, "model: {d_model: 64, n_heads: 2}\n", "nope.yaml")  # beside the child: found
    assert load_config(child).model.d_model == 64


def test_sections_made_in_python_are_checked_as_yaml_would_be():
    from transformer_cli.config import DecodeConfig
    from transformer_cli.config_train import TrainConfig
    from transformer_cli.config_values import ConfigError
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


def test_a_suggested_command_names_the_config_as_it_was_given(tmp_path, monkeypatch):
    import copy

    from transformer_cli.config_loading import command_for

    monkeypatch.chdir(tmp_path)
    (tmp_path / "cfgs").mkdir()
    (tmp_path / "cfgs" / "d3g.yaml").write_text("name: other\n")  # neither cfgs/ nor the name
    cfg = copy.deepcopy(load_config("cfgs/d3g.yaml", ["data.dir=my data"]))  # as training copies it
    command = command_for(cfg, "preprocess", "--verify")
    assert command == "tfm preprocess -c cfgs/d3g.yaml --set 'data.dir=my data' --verify"
    assert command_for(Config(), "preprocess") == "tfm preprocess -c CONFIG"  # not loaded from a file
