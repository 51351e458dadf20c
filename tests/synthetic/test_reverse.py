"""synthetic/reverse.py: the reverse run of a config (the model that back-translates for it):
the same config with its languages swapped, named <name>.reverse, trained on the real pairs
alone from scratch, with its own recipe when synthetic.reverse_recipe names one; and the
checkpoint back-translation uses."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import write_config

from transformer_cli.config_loading import load_config
from transformer_cli.corrections.store import Correction, CorrectionStore
from transformer_cli.corrections.training import PART
from transformer_cli.errors import UsageError
from transformer_cli.synthetic.reverse import SUFFIX, back_translation_model, reverse_config
from transformer_cli.training.run_data import prepare_run_data, training_split


@pytest.fixture
def cfg(tmp_path, corpus_dir):
    synthetic = {
        "back_translation": {"text": ["parallel"]},
        "forward_translation": {"text": ["parallel"], "teachers": ["t.pt"]},
    }
    path = write_config(
        tmp_path / "bt.yaml",
        tmp_path,
        corpus_dir,
        synthetic=synthetic,
        train={"init_from": "published"},
        decode={"ensemble": ["a.pt", "b.pt"], "ensemble_weights": [1.0, 2.0]},
    )
    return load_config(str(path), ["model.d_model=48"])


def test_the_reverse_run_swaps_the_languages_and_trains_on_the_real_pairs_alone(cfg):
    reverse = reverse_config(cfg)
    assert reverse.name == "bt" + SUFFIX and reverse.run_dir == Path(cfg.train.out_dir) / "bt.reverse"
    assert (reverse.data.src_lang, reverse.data.tgt_lang) == (cfg.data.tgt_lang, cfg.data.src_lang)
    assert not reverse.synthetic.enabled
    assert reverse.decode.ensemble == [] and reverse.train.init_from is None
    assert reverse.model == cfg.model and reverse.data.corpus == cfg.data.corpus  # its own recipe
    assert cfg.name == "bt" and cfg.synthetic.enabled  # the config itself is unchanged


def test_a_reverse_recipe_gives_its_sections_with_the_command_lines(cfg):
    cfg.synthetic.reverse_recipe = "tiny.yaml"
    reverse = reverse_config(cfg)
    tiny = load_config("tiny.yaml", ["model.d_model=48"])
    assert (reverse.model, reverse.train.epochs) == (tiny.model, tiny.train.epochs)
    assert reverse.tokenizer == tiny.tokenizer and reverse.data.src_lang == cfg.data.tgt_lang


def test_back_translation_uses_the_reverse_runs_best_or_a_named_model(cfg):
    with pytest.raises(UsageError) as caught:
        back_translation_model(cfg)
    assert "back-translation needs the reverse model" in str(caught.value)
    assert "train it first with `tfm train -c " in str(caught.value) and "--reverse`" in str(caught.value)
    best = reverse_config(cfg).run_dir / "best.pt"
    best.parent.mkdir(parents=True)
    best.write_bytes(b"")
    assert back_translation_model(cfg) == best
    cfg.synthetic.back_translation.model = "elsewhere/model.pt"
    assert back_translation_model(cfg) == Path("elsewhere/model.pt")


@pytest.mark.parametrize("recipe", [None, "tiny.yaml"])
def test_the_reverse_run_leaves_the_configs_corrections_out(tmp_path, corpus_dir, recipe):
    """A store's corrections are pairs of the config's direction: the reverse run (its languages
    swapped) trains on the real pairs alone, never on them with their sides crossed."""
    store = CorrectionStore(tmp_path / "store")
    store.add([Correction("Ein Hund rennt .", "A dog runs ."), Correction("Eine Katze .", "A cat .")])
    synthetic = {"back_translation": {"text": ["parallel"]}, "reverse_recipe": recipe}
    path = write_config(
        tmp_path / "c.yaml", tmp_path, corpus_dir, synthetic=synthetic, corrections={"store": str(tmp_path / "store")}
    )
    reverse = reverse_config(load_config(str(path), ["model.d_model=48", "tokenizer.vocab_size=200"]))
    prepared, _ = prepare_run_data(reverse)
    assert PART not in prepared.manifest.parts and not prepared.manifest.parts
    assert len(training_split(reverse, prepared)) == len(prepared.split("train"))
