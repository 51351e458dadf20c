"""data/augment.py: per-batch augmentation (subword sampling, source noise) and the training
batches that carry it, deterministic by (seed, epoch, batch). (Workers and the epoch plan:
test_loader.py.)"""

from __future__ import annotations

import random

import pytest
import torch
from helpers import write_config

from transformer_cli.config_loading import load_config
from transformer_cli.data.augment import SOURCE_VARIANTS, Augmentation, SourceNoise
from transformer_cli.data.batching import collate
from transformer_cli.data.loader import TrainingData
from transformer_cli.data.preprocess import prepare
from transformer_cli.errors import UsageError


def _config(tmp_path, corpus_dir, tokenizer=None, **train):
    path = write_config(
        tmp_path / "ep.yaml",
        tmp_path,
        corpus_dir,
        tokenizer={"kind": "sentencepiece", "vocab_size": 120, "joint": True, **(tokenizer or {})},
        train=train,
    )
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
        "as_given": line,
        "lowercased": "ein mann sieht einen ball ?  ",
        "uppercased": "EIN MANN SIEHT EINEN BALL ?  ",
        "unpunctuated": "Ein Mann sieht einen Ball",
    }
    assert SOURCE_VARIANTS["unpunctuated"]("Ja ... nein!") == "Ja ... nein"


def _data(cfg, prepared, workers=0):
    cfg.train.data_workers = workers
    return TrainingData(cfg, prepared.split("train"), Augmentation.from_config(cfg, prepared.tokenizers))


def _epoch(data, epoch):
    """Every batch of an epoch, in order."""
    return [b for group in data.steps_from(epoch, 0) for b in group]


def _same(a, b):
    return len(a) == len(b) and all(
        torch.equal(x.src, y.src) and torch.equal(x.tgt_out, y.tgt_out) for x, y in zip(a, b)
    )


def test_without_sampling_or_noise_the_batches_are_the_preprocessed_ids(tmp_path, corpus_dir):
    cfg = _config(tmp_path, corpus_dir)
    prepared, _ = prepare(cfg)
    data = _data(cfg, prepared)
    assert not data.augmentation.active
    split = prepared.split("train")
    planned = [
        collate(split, idx, prepared.tokenizers.framing, cfg.model.max_len)
        for s in range(data.steps(0))
        for idx in data.step_indices(0, s)
    ]
    assert _same(_epoch(data, 0), planned)
    assert sum(len(b.src) for b in planned) == len(split)  # every pair once (one process)


def test_subword_sampling_differs_per_epoch_and_keeps_the_text(tmp_path, corpus_dir):
    cfg = _config(tmp_path, corpus_dir, tokenizer={"sampling": 0.1})
    prepared, _ = prepare(cfg)
    one = _data(cfg, prepared, workers=1)
    e0, e1 = _epoch(one, 0), _epoch(one, 1)
    assert not _same(e0, e1)
    split = prepared.split("train")
    fixed = [
        collate(split, idx, prepared.tokenizers.framing, cfg.model.max_len)
        for s in range(one.steps(0))
        for idx in one.step_indices(0, s)
    ]
    assert not _same(e0, fixed)
    tok = prepared.tokenizers
    indices = [i for s in range(one.steps(0)) for idx in one.step_indices(0, s) for i in idx]
    decoded = sorted(tok.src.decode(row) for b in e0 for row in b.src.tolist())
    assert decoded == sorted(split.lines(int(i))[0] for i in indices)  # sampled, spelled the same


def test_sampling_leaves_validation_test_and_translation_deterministic(tmp_path, corpus_dir):
    cfg = _config(
        tmp_path, corpus_dir, tokenizer={"sampling": 0.3}, transform_options={"source_noise": {"lowercase": 0.5}}
    )
    prepared, _ = prepare(cfg)
    _epoch(_data(cfg, prepared), 1)  # a sampled epoch has been drawn (and seeded sentencepiece)
    tok = prepared.tokenizers
    for split in ("val", "test"):
        sources = prepared.text(split, "de")
        encoded = [tok.src.encode(line) for line in sources]
        assert encoded == [tok.src.encode(line) for line in sources]  # every call the same
        assert prepared.split(split).src_lengths.tolist() == [len(ids) for ids in encoded]
        assert [prepared.split(split).pair(i)[0].tolist() for i in range(3)] == encoded[:3]


def test_source_noise_reaches_the_encoded_sources_only(tmp_path, corpus_dir):
    cfg = _config(tmp_path, corpus_dir, transform_options={"source_noise": {"lowercase": 1.0}})
    prepared, _ = prepare(cfg)
    split = prepared.split("train")
    pairs = Augmentation.from_config(cfg, prepared.tokenizers).pairs(split, [0, 1, 2], seed=5)
    tok = prepared.tokenizers
    for i, (src, tgt) in enumerate(pairs):
        source, target = split.lines(i)
        assert list(src) == tok.src.encode(source.lower())
        assert list(tgt) == tok.tgt.encode(target)  # targets keep their case


class UpperTargets:
    """A transform from outside the package: targets in capitals (it changes targets, so
    their ids are encoded again)."""

    changes_targets = True

    def __call__(self, source, target, rng):
        return source, target.upper()


def test_a_transform_registered_from_outside_runs_after_the_noise_in_order(tmp_path, corpus_dir):
    from transformer_cli.seams import TRANSFORMS

    TRANSFORMS.register("upper_targets", lambda cfg: UpperTargets())
    try:
        cfg = _config(
            tmp_path,
            corpus_dir,
            transform_options={"source_noise": {"lowercase": 1.0}},
            transforms=["source_noise", "upper_targets"],
        )
        prepared, _ = prepare(cfg)
        split, tok = prepared.split("train"), prepared.tokenizers
        pairs = Augmentation.from_config(cfg, tok).pairs(split, [0, 1, 2], seed=5)
        for i, (src, tgt) in enumerate(pairs):
            source, target = split.lines(i)
            assert list(src) == tok.src.encode(source.lower())
            assert list(tgt) == tok.tgt.encode(target.upper())
        cfg.train.transforms = ["upper_targts"]
        with pytest.raises(UsageError, match="train.transforms: unknown transform 'upper_targts'"):
            Augmentation.from_config(cfg, tok)
    finally:
        TRANSFORMS.unregister("upper_targets")


def test_sampling_needs_sentencepiece(tmp_path, corpus_dir):
    with pytest.raises(UsageError, match="tokenizer.sampling needs a tokenizer that samples"):
        _config(tmp_path, corpus_dir, tokenizer={"kind": "spacy", "sampling": 0.1})
