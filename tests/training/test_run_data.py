"""training/run_data.py: the data a run trains on, prepared once for every command that needs
it: the config's own corpus (fitted tokenizers; prepared again only when it changed), or, for a
run that continues a model, the corpus encoded with the parent's tokenizers."""

from __future__ import annotations

from helpers import untrained_checkpoint, write_config

from transformer_cli.checkpoint import Checkpoint
from transformer_cli.config_loading import load_config
from transformer_cli.tokenizers.pair import TokenizerPair
from transformer_cli.training.run_data import prepare_run_data


def test_the_configs_corpus_is_prepared_once(tmp_path, corpus_dir):
    cfg = load_config(str(write_config(tmp_path / "own.yaml", tmp_path, corpus_dir)))
    prepared, built = prepare_run_data(cfg)
    assert built and prepared.folder == cfg.data_dir and prepared.manifest.splits["train"].pairs == 300
    again, rebuilt = prepare_run_data(cfg)
    assert not rebuilt and again.fingerprint == prepared.fingerprint
    assert prepared.manifest.tokenizer_from is None


def test_a_continued_run_encodes_with_its_parents_tokenizers(tmp_path, corpus_dir):
    parent = untrained_checkpoint(tmp_path / "parent.pt")
    path = write_config(tmp_path / "child.yaml", tmp_path, corpus_dir, train={"init_from": str(parent)})
    prepared, _ = prepare_run_data(load_config(str(path)))
    digest = Checkpoint.read(parent).sha256
    assert (
        prepared.tokenizers.vocabulary_digest()
        == TokenizerPair.from_state(Checkpoint.read(parent).tokenizer).vocabulary_digest()
    )  # not fitted anew
    assert prepared.manifest.tokenizer_from is not None and prepared.manifest.tokenizer_from["sha256"] == digest
    own, _ = prepare_run_data(load_config(str(path)), given=None)  # the caller says: its own
    assert own.tokenizers.vocabulary_digest() != prepared.tokenizers.vocabulary_digest()
