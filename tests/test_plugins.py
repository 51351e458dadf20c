"""tfm extended from a user's module: a config's `plugins:` names tests/plugins/toy_plugins.py,
which adds a toy to each seam (architecture, tokenizer, criterion, search strategy, export
format with its engine, corpus), each with config keys of its own; a name mistyped is refused
where the config is loaded, with the names known."""

from __future__ import annotations

import contextlib
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import write_corpus

from transformer_cli import registry
from transformer_cli.config_loading import load_config
from transformer_cli.errors import UsageError

PLUGIN = Path(__file__).parent / "plugins" / "toy_plugins.py"


@contextlib.contextmanager
def registries_restored() -> Iterator[None]:
    """Within the block the toy module may register; afterwards the registries are as they
    were and the module is forgotten."""
    saved = [(r, dict(r._entries), dict(r._settings)) for r in registry._REGISTRIES]
    try:
        yield
    finally:
        for r, entries, settings in saved:
            r._entries, r._settings = entries, settings
        sys.modules.pop("toy_plugins", None)


@pytest.fixture
def isolated():
    with registries_restored():
        yield


def toy_config(folder: Path, corpus: Path, **changes: dict) -> Path:
    """toy.yaml beside a copy of the toy module (`plugins: [toy_plugins.py]`, relative to it),
    choosing every toy with a value for each of its keys; `changes` update its sections."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(PLUGIN, folder / "toy_plugins.py")
    cfg: dict[str, Any] = {
        "plugins": ["toy_plugins.py"],
        "data": {
            "corpus": "toy_corpus",
            "corpus_options": {"folder": str(corpus), "suffix": ".txt"},
            "dir": str(folder / "data"),
            "cache_dir": str(folder / "cache"),
            "train_max_len": 120,
        },
        "tokenizer": {"kind": "toy_chars", "options": {"space": "~"}},
        "model": {"architecture": "toy", "width": 32, "max_len": 160},
        "train": {
            "epochs": 1,
            "batch_size": 64,
            "lr": 3e-3,
            "threads": 1,
            "precision": "fp32",
            "criterion": "toy_scaled",
            "criterion_options": {"scale": 2.0},
            "out_dir": str(folder / "checkpoints"),
            "checkpoint_every_minutes": None,
        },
        "decode": {"strategy": "toy_short", "strategy_options": {"max_tokens": 4}},
        "export": {"format": "toy_copy", "options": {"note": "made by a plugin"}},
    }
    for section, values in changes.items():
        cfg[section] = {**cfg.get(section, {}), **values}
    (folder / "toy.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False), encoding="utf-8")
    return folder / "toy.yaml"


def toy_corpus(folder: Path) -> Path:
    """The synthetic corpus as files `<split>.<lang>.txt` (the toy corpus's layout)."""
    write_corpus(folder, {"train": 200, "val": 20, "test_2016_flickr": 10}, gz=False)
    for path in list(folder.iterdir()):
        path.rename(path.with_name(path.name + ".txt"))
    return folder


def _error(path: Path) -> str:
    with pytest.raises(UsageError) as refused:
        load_config(str(path))
    return str(refused.value)


def _at(path: Path, key: str) -> str:
    """`file:line` of the first line of `path` that gives `key`."""
    lines = path.read_text().splitlines()
    return f"{path}:{next(i for i, text in enumerate(lines, 1) if text.strip().startswith(f'{key}:'))}"


def test_each_toy_comes_with_its_own_keys_read_and_checked_as_the_configs(tmp_path, isolated):
    from transformer_cli.seams import CORPORA, CRITERIA, EXPORTERS, OPTIMIZERS, SCHEDULES, SEARCH_STRATEGIES, TOKENIZERS

    cfg = load_config(str(toy_config(tmp_path, tmp_path / "corpus")))
    assert type(cfg.model).__name__ == "ToyModelConfig" and cfg.model.width == 32
    assert not hasattr(cfg.model, "d_model")  # no Transformer key, no Transformer check
    assert cfg.plugins == [str(tmp_path / "toy_plugins.py")]  # relative to the config
    assert TOKENIZERS.options(cfg.tokenizer.kind, cfg.tokenizer.options).space == "~"
    assert CRITERIA.options(cfg.train.criterion, cfg.train.criterion_options).scale == 2.0
    assert SEARCH_STRATEGIES.options(cfg.decode.strategy, cfg.decode.strategy_options).max_tokens == 4
    assert EXPORTERS.options(cfg.export.format, cfg.export.options).note == "made by a plugin"
    assert CORPORA.options(cfg.data.corpus, cfg.data.corpus_options).suffix == ".txt"

    path = toy_config(tmp_path, tmp_path, model={"d_model": 64})
    assert _error(path) == (
        f"{_at(path, 'd_model')}: unknown key 'model.d_model' (known: architecture, max_len, width, layers)"
    )
    path = toy_config(tmp_path, tmp_path, model={"width": 31})
    assert _error(path) == f"{_at(path, 'width')}: model.width=31 must be even"  # the toy's own check
    path = toy_config(tmp_path, tmp_path, train={"criterion_options": {"scal": 3}})
    assert _error(path).startswith(f"{_at(path, 'scal')}: unknown key 'train.criterion_options.scal' (did you mean")
    path = toy_config(
        tmp_path,
        tmp_path,
        train={"optimizer": "toy_sgd", "optimizer_options": {"momentum": 0.9}, "schedule": "toy_decay"},
    )
    cfg = load_config(str(path))  # an optimizer's and a schedule's own keys, as a criterion's
    assert OPTIMIZERS.options(cfg.train.optimizer, cfg.train.optimizer_options).momentum == 0.9
    assert SCHEDULES[cfg.train.schedule](cfg.train, 2) == 0.25
    path = toy_config(tmp_path, tmp_path, train={"optimizer": "toy_sgd", "optimizer_options": {"moment": 0.9}})
    assert _error(path).startswith(f"{_at(path, 'moment')}: unknown key 'train.optimizer_options.moment' (did you")
    path = toy_config(tmp_path, tmp_path, train={"optimizer": "adam", "optimizer_options": {"momentum": 0.9}})
    assert _error(path) == (  # adam's own keys are betas, eps and weight_decay
        f"{_at(path, 'momentum')}: unknown key 'train.optimizer_options.momentum' (known: betas, eps, weight_decay)"
    )
    path = toy_config(tmp_path, tmp_path, train={"valid_decode": "toy_short"})  # validation by any strategy
    assert load_config(str(path)).train.valid_decode == "toy_short"
    path = toy_config(tmp_path, tmp_path, train={"valid_decode": "toy_shrot"})
    assert _error(path).startswith(
        f"{_at(path, 'valid_decode')}: train.valid_decode: unknown search strategy 'toy_shrot'"
    )
    path = toy_config(tmp_path, tmp_path, decode={"strategy_options": {"max_tokens": "few"}})
    assert _error(path) == (
        f"{_at(path, 'max_tokens')}: decode.strategy_options.max_tokens must be an integer (got 'few')"
    )
    path = toy_config(tmp_path, tmp_path, decode={"strategy": "greedy"})
    assert _error(path) == (
        f"{_at(path, 'strategy_options')}: decode.strategy_options: the search "
        "strategy 'greedy' takes no options (got max_tokens)"
    )


@pytest.mark.parametrize(
    "section, key, typo, known",
    [
        ("model", "architecture", "toyy", "model architecture 'toyy' (known: toy, transformer)"),
        (
            "tokenizer",
            "kind",
            "toy_char",
            "tokenizer kind 'toy_char' (known: piece-vocab, sentencepiece, spacy, toy_chars)",
        ),
        ("train", "criterion", "toy_scale", "training criterion 'toy_scale' (known: cross_entropy, toy_scaled)"),
        (
            "decode",
            "strategy",
            "toy_shrot",
            "search strategy 'toy_shrot' (known: beam, greedy, sample, toy_short, auto)",
        ),
        ("export", "format", "toy_cpy", "export format 'toy_cpy' (known: ctranslate2, hf, toy_copy)"),
        ("data", "corpus", "toy_corpse", "parallel corpus 'toy_corpse' (known: files, multi30k, toy_corpus)"),
        ("train", "optimizer", "adamm", "optimizer 'adamm' (known: adam, adamw, toy_sgd)"),
        ("train", "schedule", "cosine", "learning-rate schedule 'cosine' (known: constant, inverse_sqrt, toy_decay)"),
        ("train", "transforms", ["nois"], "transform 'nois' (known: source_noise)"),
    ],
)
def test_a_mistyped_name_is_refused_where_the_config_is_loaded(tmp_path, isolated, section, key, typo, known):
    path = toy_config(tmp_path, tmp_path, **{section: {key: typo}})
    assert _error(path) == f"{_at(path, key)}: {section}.{key}: unknown {known}"


def test_a_plugin_that_cannot_be_imported_is_named_with_the_config_line(tmp_path, isolated):
    path = toy_config(tmp_path, tmp_path)
    path.write_text(path.read_text().replace("- toy_plugins.py", "- toy_plugins_gone.py"))
    assert _error(path) == f"{path}:1: plugins: no such plugin file: {tmp_path / 'toy_plugins_gone.py'}"
    path.write_text(path.read_text().replace("- toy_plugins_gone.py", "- toy_plugins_gone"))
    assert _error(path) == (
        f"{path}:1: plugins: cannot import 'toy_plugins_gone': ModuleNotFoundError: No module named 'toy_plugins_gone'"
    )


@pytest.mark.slow
def test_a_run_made_of_toys_trains_exports_and_translates(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from transformer_cli.api import load
    from transformer_cli.cli import app
    from transformer_cli.training.session import run_training

    monkeypatch.delenv("TFM_DATA_SOURCE", raising=False)  # the corpus is the toy's
    monkeypatch.setenv("TOY_PLUGINS_LOG", str(tmp_path / "used.log"))
    config = toy_config(tmp_path / "run", toy_corpus(tmp_path / "corpus"))
    out = tmp_path / "out"
    with registries_restored():
        run_training(load_config(str(config)))
        parent = load_config(str(config)).run_dir / "best.pt"  # continued by a run of its family,
        child = load_config(str(config), ["name=toy2", f"train.init_from={parent}", "train.continued.epochs=1"])
        run_training(child)  # which has none of the Transformer's dropouts
        assert (child.run_dir / "best.pt").is_file()
        r = CliRunner().invoke(app, ["export", "-c", str(config), "-o", str(out)])  # export.format: toy_copy
        assert r.exit_code == 0, r.output
        assert "(toy copy: made by a plugin," in r.output
        translation = load(out, device="cpu").translate(["Ein Hund rennt."])[0]  # by the toy engine
        assert 0 < len(translation) <= 4  # a character a token, cut at max_tokens
    used = set((tmp_path / "used.log").read_text().splitlines())
    assert {
        "corpus folder=corpus",
        "tokenizer space=~",
        "model width=32",
        "criterion scale=2.0",
        "strategy max_tokens=4",
    } <= used
    with pytest.raises(UsageError) as refused:  # the plugins not imported: its engine unknown
        load(out, device="cpu")
    assert str(refused.value) == (
        f"{out}: unknown export engine 'toy_copy' (known: ctranslate2, torch, "
        "transformers) (an export of a plugin's format: name the plugin in the "
        "config's plugins:, or install it)"
    )
