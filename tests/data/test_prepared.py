"""data/prepared.py: a preprocessed folder as its readers see it: its manifest, tokenizers,
memory-mapped splits and texts, loaded only when it is there and of this tfm's format; a
damaged file is one line saying how to rebuild it; its files checked against the manifest."""

from __future__ import annotations

import json

import pytest
from helpers import write_config

from transformer_cli.config_loading import load_config
from transformer_cli.data.manifest import DataManifest
from transformer_cli.data.prepared import Prepared, load_prepared, verify_folder
from transformer_cli.data.preprocess import prepare
from transformer_cli.errors import TfmError, UsageError


@pytest.fixture
def cfg(tmp_path, corpus_dir):
    return load_config(str(write_config(tmp_path / "m.yaml", tmp_path, corpus_dir)))


def test_a_folder_reads_as_it_was_written(cfg):
    with pytest.raises(UsageError, match=r"no preprocessed data in .*: run `tfm preprocess --config m.yaml` first"):
        load_prepared(cfg)
    made, _ = prepare(cfg)
    prepared = load_prepared(cfg)
    assert isinstance(prepared, Prepared) and prepared.manifest == made.manifest
    assert prepared.langs == ("de", "en") and prepared.fingerprint == made.manifest.fingerprint
    assert prepared.tokenizers.state() == made.tokenizers.state()
    assert len(prepared.split("val")) == 40 and len(prepared.text("val", "en")) == 40
    assert verify_folder(cfg.data_dir, prepared.manifest) is None
    assert verify_folder(cfg.data_dir, prepared.manifest, full=True) is None


def test_a_changed_file_fails_the_check_and_a_damaged_one_is_one_line(cfg):
    prepared, _ = prepare(cfg)
    text = cfg.data_dir / "val.en.txt"
    text.write_text(text.read_text().upper())
    assert verify_folder(cfg.data_dir, prepared.manifest, full=True) == "val.en.txt does not match its checksum"
    text.unlink()
    assert verify_folder(cfg.data_dir, prepared.manifest) == "val.en.txt is missing or unreadable"
    with pytest.raises(TfmError, match=r"preprocessed file .*val.en.txt is damaged or unreadable .*--force"):
        load_prepared(cfg).text("val", "en")
    (cfg.data_dir / "tokenizer.json").write_text("{")
    with pytest.raises(TfmError, match=r"tokenizer.json is damaged or unreadable"):
        load_prepared(cfg).tokenizers  # noqa: B018 - read when used


def test_an_older_tfms_folder_is_named(cfg):
    prepare(cfg)
    path = cfg.data_dir / "manifest.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "format": 1}))
    with pytest.raises(UsageError, match=r"was made by an older tfm \(format 1, now 2\): run `tfm preprocess"):
        load_prepared(cfg)
    assert DataManifest.read(cfg.data_dir) is None


def test_a_damaged_data_manifest_is_refused_in_one_line(tmp_path, corpus_dir):

    cfg = load_config(str(write_config(tmp_path / "m.yaml", tmp_path, corpus_dir)))
    prepared, _ = prepare(cfg)
    assert DataManifest.read(cfg.data_dir) == prepared.manifest  # what was written reads back
    path = cfg.data_dir / "manifest.json"
    raw = json.loads(path.read_text())
    raw["vocab_size"] = {"src": "many", "tgt": 8}
    path.write_text(json.dumps(raw))
    with pytest.raises(
        TfmError,
        match=r"manifest.json is damaged or unreadable \(manifest.json: "
        r"vocab_size: src has the wrong type \(str\)\)",
    ):
        load_prepared(cfg)
