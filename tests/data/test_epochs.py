"""Per-epoch training data: subword sampling and source noise, deterministic by (seed, epoch)."""

from __future__ import annotations

import random

import pytest

from helpers import write_config
from transformer_cli.config import load_config
from transformer_cli.data.epochs import SOURCE_VARIANTS, SourceNoise, TrainingEpochs
from transformer_cli.data.preprocess import prepare
from transformer_cli.errors import UsageError


def _config(tmp_path, corpus_dir, tokenizer=None, **train):
    path = write_config(tmp_path / "ep.yaml", tmp_path, corpus_dir,
                        tokenizer={"kind": "sentencepiece", "vocab_size": 120, "joint": True,
                                   **(tokenizer or {})}, train=train)
    return load_config(str(path))


def test_source_noise_is_seeded_and_keeps_its_shares():
    noise = SourceNoise(lowercase=0.3, uppercase=0.1, unpunctuated=0.5)
    line = "Ein Mann sieht einen Ball."
    first = [noise.apply(line, rng) for rng in [random.Random(1)] for _ in range(2000)]
    again = [noise.apply(line, rng) for rng in [random.Random(1)] for _ in range(2000)]
    assert first == again
    lowered = sum(x.lower() == x and x != x.upper() for x in first) / len(first)
    upper = sum(x == x.upper() for x in first) / len(first)
    bare = sum(not x.endswith(".") for x in first) / len(first)
    assert abs(lowered - 0.3) < 0.04 and abs(upper - 0.1) < 0.03 and abs(bare - 0.5) < 0.04
    assert {x.rstrip(".").lower() for x in first} == {"ein mann sieht einen ball"}


def test_source_variants_rewrite_whole_sentences_as_users_type_them():
    line = "Ein Mann sieht einen Ball ?  "
    assert {name: f(line) for name, f in SOURCE_VARIANTS.items()} == {
        "as_given": line, "lowercased": "ein mann sieht einen ball ?  ",
        "uppercased": "EIN MANN SIEHT EINEN BALL ?  ", "unpunctuated": "Ein Mann sieht einen Ball"}
    assert SOURCE_VARIANTS["unpunctuated"]("Ja ... nein!") == "Ja ... nein"


def test_without_sampling_or_noise_every_epoch_is_the_preprocessed_split(tmp_path, corpus_dir):
    cfg = _config(tmp_path, corpus_dir)
    prepared, _ = prepare(cfg)
    epochs = TrainingEpochs(cfg, prepared)
    assert not epochs.varies
    assert epochs.split(0) is epochs.split(3)
    assert epochs.split(0).src.tolist() == prepared.split("train").src.tolist()


def test_subword_sampling_differs_per_epoch_repeats_per_seed_and_keeps_the_text(tmp_path, corpus_dir):
    cfg = _config(tmp_path, corpus_dir, tokenizer={"sampling": 0.1})
    prepared, _ = prepare(cfg)
    fixed = prepared.split("train")
    one, two = TrainingEpochs(cfg, prepared), TrainingEpochs(cfg, prepared)
    e0, e1 = one.split(0), one.split(1)
    assert e0.src.tolist() == two.split(0).src.tolist()  # a function of (seed, epoch): resume-safe
    assert e0.src.tolist() != e1.src.tolist() and e0.src.tolist() != fixed.src.tolist()
    assert len(e0) == len(fixed)  # the same pairs, segmented differently
    tok = prepared.tokenizers
    sources = prepared.text("train", "de")
    for i in range(0, len(e0), 37):  # a sampled segmentation still spells the same sentence
        assert tok.src.decode(e0.pair(i)[0].tolist()) == sources[i]


def test_sampling_leaves_validation_test_and_translation_deterministic(tmp_path, corpus_dir):
    cfg = _config(tmp_path, corpus_dir, tokenizer={"sampling": 0.3}, source_lowercase=0.5)
    prepared, _ = prepare(cfg)
    TrainingEpochs(cfg, prepared).split(1)  # a sampled epoch has been drawn (and seeded sentencepiece)
    tok = prepared.tokenizers
    for split in ("val", "test"):
        sources = prepared.text(split, "de")
        encoded = [tok.src.encode(line) for line in sources]
        assert encoded == [tok.src.encode(line) for line in sources]  # every call the same
        assert prepared.split(split).src_lengths.tolist() == [len(ids) for ids in encoded]
        assert [prepared.split(split).pair(i)[0].tolist() for i in range(3)] == encoded[:3]


def test_source_noise_reaches_the_encoded_sources_only(tmp_path, corpus_dir):
    cfg = _config(tmp_path, corpus_dir, source_lowercase=1.0)
    prepared, _ = prepare(cfg)
    split = TrainingEpochs(cfg, prepared).split(0)
    tok = prepared.tokenizers
    sources, targets = prepared.text("train", "de"), prepared.text("train", "en")
    for i in (0, 1, 2):
        assert split.pair(i)[0].tolist() == tok.src.encode(sources[i].lower())
        assert split.pair(i)[1].tolist() == tok.tgt.encode(targets[i])  # targets keep their case


def test_sampling_needs_sentencepiece(tmp_path, corpus_dir):
    with pytest.raises(UsageError, match="tokenizer.sampling needs tokenizer.kind: sentencepiece"):
        _config(tmp_path, corpus_dir, tokenizer={"kind": "spacy", "sampling": 0.1})
