"""config_loading.py: finding a config (beside, ./, configs/, the shipped ones), YAML read
strictly, `extends:` chains, `--set`, and every problem one line naming the file and line (or
the --set) that gave the value."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
from helpers import config_from_dict

from transformer_cli.config import Config, DecodeConfig
from transformer_cli.config_loading import (
    command_for,
    given_overrides,
    load_config,
    resolve_config_path,
)
from transformer_cli.config_values import build_section
from transformer_cli.errors import UsageError


def write(tmp_path: Path, text: str, name: str = "c.yaml") -> str:
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def test_bare_name_resolves_to_configs_folder_then_package(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    shipped = resolve_config_path("seed.yaml")  # not in ./configs here: the packaged copy
    assert shipped.name == "seed.yaml" and shipped.is_file()
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "seed.yaml").write_text("model: {d_model: 64, n_heads: 2}\n")
    assert resolve_config_path("seed") == Path("configs/seed.yaml")
    assert load_config("seed").model.d_model == 64


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


def test_missing_config_names_where_it_looked():
    with pytest.raises(UsageError, match="config file not found: 'nope.yaml'.*base.yaml"):
        load_config("nope.yaml")


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
        (
            "train:\n  optimizer_options:\n    betas: [0.9, x]\n",
            "4: train.optimizer_options.betas[1] must be a number (got 'x')",
        ),
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


def test_a_suggested_command_names_the_config_as_it_was_given(tmp_path, monkeypatch):

    monkeypatch.chdir(tmp_path)
    (tmp_path / "cfgs").mkdir()
    (tmp_path / "cfgs" / "d3g.yaml").write_text("name: other\n")  # neither cfgs/ nor the name
    cfg = copy.deepcopy(load_config("cfgs/d3g.yaml", ["data.dir=my data"]))  # as training copies it
    command = command_for(cfg, "preprocess", "--verify")
    assert command == "tfm preprocess -c cfgs/d3g.yaml --set 'data.dir=my data' --verify"
    assert command_for(Config(), "preprocess") == "tfm preprocess -c CONFIG"  # not loaded from a file


def test_a_key_given_twice_and_an_empty_file_are_refused_in_one_line(tmp_path):
    twice = write(tmp_path, "train:\n  lr: 1.0e-3\n  epochs: 3\n  lr: 2.0e-3\n")
    assert _error(twice) == f"{twice}:4: YAML syntax error: duplicate key 'lr' (first given on line 2)"
    empty = write(tmp_path, "# nothing yet\n", "empty.yaml")
    assert _error(empty).startswith(f"{empty}: the config is empty: give at least one section")
    (tmp_path / "bin.yaml").write_bytes(b"\xff\n")
    assert _error(str(tmp_path / "bin.yaml")).startswith(f"{tmp_path / 'bin.yaml'}: cannot read config: 'utf-8' codec")


def test_the_overrides_a_config_was_loaded_with_are_kept_through_copies(tmp_path):
    cfg = load_config(write(tmp_path, "train: {epochs: 3}\n"), ["train.epochs=4", "train.lr=1e-3"])
    assert cfg.train.epochs == 4 and cfg.name == "c"  # the name: the file's stem
    assert given_overrides(copy.deepcopy(cfg)) == ["train.epochs=4", "train.lr=1e-3"]
    assert given_overrides(Config()) == []
    assert given_overrides(config_from_dict(cfg.to_dict())) == []  # a saved config: not as typed


def test_a_saved_config_is_rebuilt_with_its_checks_and_without_importing_its_plugins(tmp_path):
    plugin = tmp_path / "never_imported.py"
    plugin.write_text("raise RuntimeError('imported')\n")
    raw = Config().to_dict() | {"plugins": [str(plugin)]}
    assert config_from_dict(raw).plugins == [str(plugin)]  # reading a file runs no code it names
    raw["model"] = {**raw["model"], "n_heads": 5}
    with pytest.raises(UsageError, match="model.n_heads=5 must divide model.d_model=256"):
        config_from_dict(raw)


OLD_KEYS = """\
train:
  betas: [0.9, 0.99]
  label_smoothing: 0.1
  schedule: inverse_sqrt
  warmup_steps: 300
  source_lowercase: 0.2
decode:
  sampling_topk: 5
  strategy: sample
"""
NEW_KEYS = """\
train:
  optimizer_options: {betas: [0.9, 0.99]}
  criterion_options: {label_smoothing: 0.1}
  schedule: inverse_sqrt
  schedule_options: {warmup_steps: 300}
  transform_options: {source_noise: {lowercase: 0.2}}
decode:
  strategy_options: {topk: 5}
  strategy: sample
"""


def test_keys_moved_into_the_entries_settings_still_read_with_a_warning_each(tmp_path, caplog):
    """The built-ins' settings moved beside their names (train.betas -> train.optimizer_options.
    betas, ...): a config of the old keys reads as the new one, the same run (its identity), and
    each old key is one warning naming its line and its new key."""
    from transformer_cli.training.run_dir import run_identity

    old, new = write(tmp_path, OLD_KEYS, "old.yaml"), write(tmp_path, NEW_KEYS, "new.yaml")
    with caplog.at_level("WARNING"):
        was = load_config(str(old), ["train.eps=1.0e-8"])
    now = load_config(str(new), ["train.optimizer_options.eps=1.0e-8"])
    assert was.train == now.train and was.decode == now.decode
    assert run_identity(was, "data") == run_identity(now, "data")
    warnings = [r.getMessage() for r in caplog.records]
    assert f"warning: {old}:2: train.betas is now train.optimizer_options.betas" in "\n".join(warnings)
    assert any("--set train.eps=1.0e-8: train.eps is now train.optimizer_options.eps" in w for w in warnings)
    assert any(f"{old}:8: decode.sampling_topk is now decode.strategy_options.topk" in w for w in warnings)
    assert len(warnings) == 6


def test_an_old_key_in_a_parent_is_blamed_on_its_own_line_and_a_new_key_over_it_is_named(tmp_path, caplog):
    """An extends chain: the warning of a parent's old key names the parent's file and line,
    not the child's that gives the new key over it (which it names as overriding it); an old
    key in both files is one warning at each file's line."""
    parent = write(
        tmp_path,
        "# a parent of an earlier version\ndata:\n  limit_train: 500\nmodel:\n  d_model: 64\n"
        "  n_heads: 4\ntrain:\n  epochs: 2\n  lr: 0.001\n  label_smoothing: 0.1\n  eps: 1.0e-8\n",
        "dold.yaml",
    )
    child = write(
        tmp_path,
        "extends: dold.yaml\ntrain:\n  criterion_options:\n    label_smoothing: 0.2\n  eps: 1.0e-7\n",
        "dchild.yaml",
    )
    with caplog.at_level("WARNING"):
        cfg = load_config(child, ["train.optimizer_options.weight_decay=0.01"])
    assert cfg.train.criterion_options == {"label_smoothing": 0.2}
    assert cfg.train.optimizer_options == {"eps": 1.0e-7, "weight_decay": 0.01}
    assert sorted(r.getMessage() for r in caplog.records) == [
        f"warning: {child}:5: train.eps is now train.optimizer_options.eps "
        "(the old name is read until a later release)",
        f"warning: {parent}:10: train.label_smoothing is now train.criterion_options.label_smoothing "
        f"(overridden by {child}:4; the old name is read until a later release)",
        f"warning: {parent}:11: train.eps is now train.optimizer_options.eps "
        f"(overridden by {child}:5; the old name is read until a later release)",
    ]
    caplog.clear()
    with caplog.at_level("WARNING"):
        load_config(parent, ["train.criterion_options.label_smoothing=0.3"])
    assert sorted(r.getMessage() for r in caplog.records)[0] == (
        f"warning: {parent}:10: train.label_smoothing is now train.criterion_options.label_smoothing "
        "(overridden by --set train.criterion_options.label_smoothing=0.3; the old name is read until a later release)"
    )


def test_an_old_key_the_chosen_entry_has_no_use_for_is_dropped_with_a_warning(tmp_path, caplog):
    cfg_path = write(tmp_path, "train:\n  schedule: constant\n  warmup_steps: 400\n")
    with caplog.at_level("WARNING"):
        cfg = load_config(str(cfg_path))
    assert cfg.train.schedule_options == {}
    assert [r.getMessage() for r in caplog.records] == [
        f"warning: {cfg_path}:3: train.warmup_steps is ignored: the learning-rate schedule 'constant' "
        "has no setting 'warmup_steps' (drop it)"
    ]


def test_an_old_key_beside_its_new_one_or_options_of_an_unchosen_transform_are_refused(tmp_path):
    both = write(tmp_path, "train:\n  eps: 1.0e-8\n  optimizer_options: {eps: 1.0e-7}\n")
    assert "train.eps is the old name of train.optimizer_options.eps: give train.optimizer_options.eps alone" in _error(
        both
    )
    unchosen = write(tmp_path, "train:\n  transforms: []\n  transform_options: {source_noise: {lowercase: 0.1}}\n")
    assert _error(unchosen) == (
        f"{unchosen}:3: train.transform_options.source_noise: 'source_noise' is not in train.transforms (none)"
    )


def test_a_saved_decode_section_of_an_earlier_version_reads_silently(caplog):
    """A checkpoint's settings hold every old key at its default: read as the entries' defaults."""
    saved = {"beam_size": 4, "strategy": "auto", "sampling_topk": 0, "sampling_temperature": 1.0, "sampling_seed": None}
    with caplog.at_level("WARNING"):
        decode = build_section(DecodeConfig, saved, "decode")
    assert decode.strategy_options == {} and decode.beam_size == 4 and not caplog.records


def test_a_childs_old_key_overrides_its_parents_new_one_and_null_drops_options(tmp_path, caplog):
    """In an extends chain each file's old keys move before the files merge: a child's
    train.warmup_steps overrides base's schedule_options; a child choosing another entry may
    drop the parent's options with null (they are left out anyway where the new entry lacks
    them: the next test)."""
    child = write(tmp_path, "extends: base.yaml\ntrain:\n  warmup_steps: 300\n")
    assert load_config(child).train.schedule_options == {"warmup_steps": 300}
    constant = write(tmp_path, "extends: base.yaml\ntrain:\n  schedule: constant\n", "constant.yaml")
    assert load_config(constant).train.schedule_options == {}
    dropped = write(
        tmp_path,
        "extends: base.yaml\ntrain:\n  schedule: constant\n  schedule_options: null\n"
        "  continued: {schedule_options: null}\n",
        "d.yaml",
    )
    assert load_config(dropped).train.schedule_options == {}


def test_a_parents_options_for_an_entry_a_child_replaces_are_left_out_where_the_new_entry_lacks_them(tmp_path, caplog):
    """base.yaml's criterion_options.label_smoothing is cross_entropy's: a child choosing another
    criterion (or a --set doing so) leaves it out with a warning naming its line, keeps the
    options the new entry has (adam's betas under adamw), and its own misspelt option is still
    an error, as is one given by --set."""
    import logging

    from transformer_cli.config_loading import load_config

    (tmp_path / "rdrop.yaml").write_text(
        "extends: base.yaml\ntrain:\n  optimizer: adamw\n  schedule: constant\n", encoding="utf-8"
    )
    with caplog.at_level(logging.WARNING, logger="tfm"):
        cfg = load_config(str(tmp_path / "rdrop.yaml"))
    assert cfg.train.optimizer_options["betas"] == [0.9, 0.98]  # adamw takes adam's betas
    assert (
        "schedule_options.warmup_steps is left out: the learning-rate schedule 'constant' has no setting" in caplog.text
    )
    assert "warmup_steps" not in (cfg.train.schedule_options or {})
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="tfm"):
        same = load_config("base.yaml", ["train.schedule=constant"])
    assert "base.yaml:" in caplog.text and "is left out" in caplog.text and not same.train.schedule_options
    (tmp_path / "typo.yaml").write_text(
        "extends: base.yaml\ntrain:\n  schedule: constant\n  schedule_options: {warmup_step: 3}\n", encoding="utf-8"
    )
    with pytest.raises(UsageError, match=r"typo.yaml:4: .*warmup_step"):
        load_config(str(tmp_path / "typo.yaml"))
    with pytest.raises(UsageError, match=r"constant.* takes no options \(got factor\)"):
        load_config(str(tmp_path / "rdrop.yaml"), ["train.schedule_options.factor=2"])
