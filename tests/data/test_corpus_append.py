"""data/corpus_append.py: a continued night's files corpus that grew at the end of its training
files encodes the new pairs alone, appended to the training split, and holds what a folder built
whole holds; anything else about the corpus builds it whole."""

from __future__ import annotations

import dataclasses
import logging

from helpers import sentence_pairs, write_config, write_corpus

from transformer_cli.config_loading import load_config
from transformer_cli.data.corpus_append import appended
from transformer_cli.data.freshness import GivenTokenizers
from transformer_cli.data.preprocess import prepare
from transformer_cli.data.sources import fetch_corpus


def _append(corpus, pairs) -> None:
    for lang, side in (("de", 0), ("en", 1)):
        with open(corpus / f"train.{lang}", "a", encoding="utf-8") as f:
            f.write("".join(f"{p[side]}\n" for p in pairs))


def _ids(prepared):
    split = prepared.split("train")
    return [tuple(x.tolist() for x in split.pair(i)) for i in range(len(split))]


def test_a_corpus_that_grew_at_the_end_encodes_its_new_pairs_alone(tmp_path, caplog):
    corpus = write_corpus(tmp_path / "corpus", {"train": 200, "val": 20, "test_2016_flickr": 10}, gz=False)
    cfg = load_config(str(write_config(tmp_path / "night.yaml", tmp_path, corpus)))
    fitted, _ = prepare(cfg)  # the parent's tokenizers, as a continued night is given them
    given = GivenTokenizers(fitted.tokenizers, {"from": "published", "sha256": "0" * 64})
    before, _ = prepare(cfg, force=True, given=given)
    shards = {p.name: p.stat().st_ino for p in cfg.data_dir.glob("train.*.bin")}

    _append(corpus, [*sentence_pairs(30, seed=9), ("", "an empty source"), ("Ein Satz .", "")])
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="tfm"):
        night, rebuilt = prepare(cfg, given=given)
    assert rebuilt and "corpus: 30 new pairs encoded (its training files grew at their end), 200 kept" in caplog.text
    assert "rebuilding" not in caplog.text
    assert all(shards[name] == (cfg.data_dir / name).stat().st_ino for name in shards)  # linked, not rewritten
    assert night.manifest.fingerprint != before.manifest.fingerprint

    whole = dataclasses.replace(cfg, data=dataclasses.replace(cfg.data, dir=str(tmp_path / "whole")))
    reference, _ = prepare(whole, given=given)  # the same corpus built whole
    assert _ids(night) == _ids(reference)
    assert night.manifest.splits["train"] == reference.manifest.splits["train"]
    assert night.manifest.dropped == reference.manifest.dropped and night.manifest.dropped.empty_train_pairs == 2
    assert night.manifest.fingerprint == reference.manifest.fingerprint
    assert prepare(cfg, given=given)[1] is False  # current now


def test_a_corpus_changed_other_than_at_its_end_is_built_whole(tmp_path):
    corpus = write_corpus(tmp_path / "corpus", {"train": 100, "val": 20, "test_2016_flickr": 10}, gz=False)
    cfg = load_config(str(write_config(tmp_path / "night.yaml", tmp_path, corpus)))
    fitted, _ = prepare(cfg)
    given = GivenTokenizers(fitted.tokenizers, {"from": "published", "sha256": "0" * 64})
    before, _ = prepare(cfg, force=True, given=given)
    files = fetch_corpus(cfg.data, str(corpus))
    assert appended(cfg, before.manifest, files, given, ()) is None  # nothing grew
    lines = (corpus / "train.de").read_text(encoding="utf-8").splitlines()
    (corpus / "train.de").write_text("".join(f"{x}\n" for x in [lines[1], lines[0], *lines[2:], "Neu ."]))
    _append(corpus, [])
    with open(corpus / "train.en", "a", encoding="utf-8") as f:
        f.write("New .\n")
    files = fetch_corpus(cfg.data, str(corpus))
    assert appended(cfg, before.manifest, files, given, ()) is None  # its first lines changed
