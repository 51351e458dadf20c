"""data/grown_folder.py: a folder encoded with the parent's tokenizers, asked for with their
growth, encodes again only the pairs that hold an added piece and then holds, id for id, what
a folder built whole with the grown tokenizers holds; a crash on the way leaves it as it was.
A growth that most pairs hold builds the folder whole, saying why, and too few training pairs
left is the same error as for a whole build."""

from __future__ import annotations

import dataclasses
import logging
import re

import pytest
from helpers import grown_tokenizers, poodle_pairs, write_config, write_corpus

from transformer_cli.config_loading import load_config
from transformer_cli.data import grown_folder
from transformer_cli.data.freshness import GivenTokenizers
from transformer_cli.data.manifest import DataManifest
from transformer_cli.data.parts import write_part
from transformer_cli.data.preprocess import prepare
from transformer_cli.data.shards import ShardWriter
from transformer_cli.errors import UsageError
from transformer_cli.tokenizers.pair import TokenizerPair
from transformer_cli.tokenizers.subword import SubwordTokenizer

LONG = (" ".join(["Ein mann"] * 40) + " .", " ".join(["A man"] * 40) + " .")  # too long for both
CARRIAGE_RETURN = ("Ein Mann\rläuft .", "A man\rruns .")  # one line each (split at line feeds alone)


def _add(corpus, split: str, pairs) -> None:
    for lang, side in (("de", 0), ("en", 1)):
        with open(corpus / f"{split}.{lang}", "a", encoding="utf-8") as f:
            f.write("".join(f"{p[side]}\n" for p in pairs))


def _given(tokenizer: SubwordTokenizer) -> GivenTokenizers:
    return GivenTokenizers(TokenizerPair(tokenizer, tokenizer, joint=True), {"from": "published", "sha256": "0" * 64})


def _everything(prepared):
    """Every split's pairs: ids and lines."""
    out = {}
    for name in prepared.manifest.shards:
        split = prepared.split(name)
        out[name] = [(*(x.tolist() for x in split.pair(i)), split.lines(i)) for i in range(len(split))]
    return out


def _setup(tmp_path, model_type: str):
    parent, grown = grown_tokenizers(model_type)
    corpus = write_corpus(tmp_path / "corpus", {"train": 200, "val": 20, "test_2016_flickr": 10}, gz=False)
    topic = poodle_pairs(40, seed=3)
    _add(corpus, "train", [CARRIAGE_RETURN, *topic[:30], LONG, ("", "an empty source")])
    _add(corpus, "val", topic[30:])
    lengths = [max(len(grown.encode_batch([s])[0]), len(grown.encode_batch([t])[0])) for s, t in topic[:30]]
    parent_lengths = [max(len(parent.encode_batch([s])[0]), len(parent.encode_batch([t])[0])) for s, t in topic[:30]]
    max_len = max(lengths)  # the growth keeps every topic pair; the parent's tokenizer spells some longer
    assert max(parent_lengths) > max_len or model_type == "unigram"
    part = write_part(tmp_path / "parts", "synthetic", ("de", "en"), ([p[0] for p in topic], [p[1] for p in topic]))
    configs = []
    for name in ("night", "whole"):
        path = write_config(tmp_path / f"{name}.yaml", tmp_path / name, corpus, data={"train_max_len": max_len})
        configs.append(load_config(str(path)))
    return configs, parent, grown, part


@pytest.mark.parametrize("model_type", ["bpe", "unigram"])
def test_a_grown_vocabulary_encodes_the_pairs_that_hold_its_pieces_and_matches_a_whole_build(
    tmp_path, caplog, monkeypatch, model_type
):
    (cfg, whole), parent, grown, part = _setup(tmp_path, model_type)
    monkeypatch.setattr(grown_folder, "WHOLE_BUILD_SHARE", 1.0)  # pair by pair, however many hold a piece
    before, _ = prepare(cfg, given=_given(parent), parts=[part])
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="tfm"):
        night, rebuilt = prepare(cfg, given=_given(grown), parts=[part])
    assert rebuilt and "rebuilding" not in caplog.text
    reference, _ = prepare(whole, given=_given(grown), parts=[part])  # the same, built whole

    assert _everything(night) == _everything(reference)
    for field in ("splits", "shards", "parts", "dropped", "corpus", "oov_rate_val", "vocab_size", "id_dtype"):
        assert getattr(night.manifest, field) == getattr(reference.manifest, field), field
    assert night.manifest.fingerprint == reference.manifest.fingerprint
    assert night.manifest.tokenizer_sha256 == reference.manifest.tokenizer_sha256 == _given(grown).digest
    assert TokenizerPair.load(cfg.data_dir).state() == TokenizerPair.load(whole.data_dir).state()  # truecaser too
    if model_type == "bpe":  # the growth shortened pairs the parent's tokenizer left out
        assert night.manifest.dropped.too_long_train_pairs < before.manifest.dropped.too_long_train_pairs

    # the pairs encoded again: those with a side whose normalized text holds an added piece
    added = grown.id_to_token(range(parent.vocab_size, grown.vocab_size))
    lines = [
        pair
        for name in ("train", "val", "test_2016_flickr", "synthetic")
        for pair in zip(*(_read(p) for p in _paths(tmp_path, name)))
        if pair[0].strip() and pair[1].strip() or not name.startswith("train")
    ]
    holds = [any(piece in grown.sp.normalize(side) for piece in added for side in pair) for pair in lines]
    match = re.search(
        rf"vocabulary grew by {len(added)} pieces: (\S+) of (\S+) pairs hold them, re-encoded", caplog.text
    )
    assert match, caplog.text
    assert (int(match[1].replace(",", "")), int(match[2].replace(",", ""))) == (sum(holds), len(lines))
    assert 0 < sum(holds) < len(lines)
    assert prepare(cfg, given=_given(grown), parts=[part])[1] is False  # current now


def _paths(tmp_path, name):
    folder = tmp_path / ("parts" if name == "synthetic" else "corpus")
    return folder / f"{name}.de", folder / f"{name}.en"


def _read(path):
    with open(path, encoding="utf-8", newline="\n") as f:
        return f.read().split("\n")[:-1]


def test_a_crash_while_encoding_again_leaves_the_folder_as_it_was(tmp_path, monkeypatch):
    (cfg, _), parent, grown, part = _setup(tmp_path, "bpe")
    monkeypatch.setattr(grown_folder, "WHOLE_BUILD_SHARE", 1.0)
    prepare(cfg, given=_given(parent), parts=[part])
    manifest = DataManifest.read(cfg.data_dir)
    calls = []

    class Crashing(ShardWriter):
        def add(self, chunk):
            calls.append(1)
            if len(calls) > 2:
                raise KeyboardInterrupt  # a stop mid-way, its first chunks written
            super().add(chunk)

    monkeypatch.setattr(grown_folder, "ShardWriter", Crashing)
    with pytest.raises(KeyboardInterrupt):
        prepare(cfg, given=_given(grown), parts=[part])
    assert DataManifest.read(cfg.data_dir) == manifest
    assert not [p for p in cfg.data_dir.parent.iterdir() if ".tmp-" in p.name or ".old-" in p.name]  # no work folder
    monkeypatch.undo()
    assert prepare(cfg, given=_given(parent), parts=[part])[1] is False  # still current for the parent


def test_a_tokenizer_that_is_no_growth_of_the_folders_builds_it_whole(tmp_path, caplog):
    (cfg, _), parent, grown, part = _setup(tmp_path, "bpe")
    prepare(cfg, given=_given(grown), parts=[part])
    with caplog.at_level(logging.INFO, logger="tfm"):
        prepare(cfg, given=_given(parent), parts=[part])  # fewer pieces: not a growth
    assert "rebuilding" in caplog.text and "vocabulary grew" not in caplog.text
    assert dataclasses.asdict(DataManifest.read(cfg.data_dir))["tokenizer_sha256"] == _given(parent).digest


def test_a_growth_most_pairs_hold_builds_the_folder_whole_and_says_why(tmp_path, caplog, monkeypatch):
    (cfg, whole), parent, grown, part = _setup(tmp_path, "bpe")
    monkeypatch.setattr(grown_folder, "WHOLE_BUILD_SHARE", 0.5)  # (most of these pairs hold a piece)
    before, _ = prepare(cfg, given=_given(parent), parts=[part])
    pairs = sum(len(before.split(name)) for name in before.manifest.shards)
    with caplog.at_level(logging.INFO, logger="tfm"):
        night, rebuilt = prepare(cfg, given=_given(grown), parts=[part])
    said = re.search(
        r"held by about (\d+)% of the pairs \(a sample of (\d+)\): more than 50%, so the folder is built whole",
        caplog.text,
    )
    assert said and int(said[1]) > 50 and int(said[2]) == pairs < grown_folder.SAMPLE_PAIRS  # (every pair)
    assert rebuilt and "rebuilding" in caplog.text and "re-encoded" not in caplog.text
    reference, _ = prepare(whole, given=_given(grown), parts=[part])
    assert _everything(night) == _everything(reference)


def test_too_few_training_pairs_left_is_the_error_of_a_whole_build(tmp_path, monkeypatch):
    (cfg, whole), parent, grown, part = _setup(tmp_path, "bpe")
    monkeypatch.setattr(grown_folder, "WHOLE_BUILD_SHARE", 1.0)
    prepare(cfg, given=_given(parent), parts=[part])
    manifest = DataManifest.read(cfg.data_dir)
    errors = []
    for config in (cfg, whole):  # the night's folder encoded again pair by pair, the other built whole
        config.data.min_train_pairs = 10_000  # (not part of the folder's fingerprint)
        with pytest.raises(UsageError) as e:
            prepare(config, given=_given(grown), parts=[part])
        errors.append(str(e.value))
    assert errors[0] == errors[1] and "at least data.min_train_pairs=10000 are needed" in errors[0]
    assert DataManifest.read(cfg.data_dir) == manifest  # left as it was
