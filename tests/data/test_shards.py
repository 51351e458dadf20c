"""data/shards.py: splits as memory-mapped token shards, written in chunks, read at random."""

from __future__ import annotations

import json
import pickle

import numpy as np
import pytest
from helpers import encoded_chunk, random_id_pairs, write_config

from transformer_cli.config_loading import load_config
from transformer_cli.data import preprocess
from transformer_cli.data.prepared import load_prepared
from transformer_cli.data.preprocess import prepare
from transformer_cli.data.shards import DamagedShard, ShardedSplit, ShardWriter, id_dtype
from transformer_cli.errors import TfmError

LANGS = ("de", "en")


@pytest.mark.parametrize("vocab", [8000, 70_000])
def test_chunks_written_across_many_shards_read_back_pair_by_pair(tmp_path, vocab):
    pairs, lines = random_id_pairs(1000, vocab)
    dtype = id_dtype(vocab)
    assert dtype == ("uint16" if vocab <= 65536 else "int32")
    writer = ShardWriter(tmp_path, "train", LANGS, dtype, shard_tokens=97)
    for start in range(0, 1000, 300):  # chunk and shard boundaries fall apart
        writer.add(encoded_chunk(pairs[start : start + 300], lines[start : start + 300]))
    shard_pairs = writer.close()
    assert len(shard_pairs) > 50 and sum(shard_pairs) == 1000
    for k in range(len(shard_pairs)):  # no shard over the limit unless one pair is
        size = sum((tmp_path / f"train.{k:05d}.{side}.bin").stat().st_size for side in ("src", "tgt"))
        assert size // np.dtype(dtype).itemsize <= 97
    split = ShardedSplit(tmp_path, "train", LANGS, dtype, shard_pairs)
    assert len(split) == 1000
    assert split.src_lengths.tolist() == [len(a) for a, _ in pairs]
    assert split.tgt_lengths.tolist() == [len(b) for _, b in pairs]
    for i in range(1000):
        src, tgt = split.pair(i)
        assert src.tolist() == pairs[i][0] and tgt.tolist() == pairs[i][1]
        assert split.lines(i) == lines[i]
    text = (tmp_path / "train.de.txt").read_text(encoding="utf-8")
    assert text == "".join(f"{a}\n" for a, _ in lines)  # the text files stay plain text
    again = pickle.loads(pickle.dumps(split))  # as a spawned worker receives it: mapped anew
    assert again.pair(999)[1].tolist() == pairs[999][1] and again.lines(500) == lines[500]


def test_a_split_continued_keeps_its_shards_and_reads_as_one_written_at_once(tmp_path):
    pairs, lines = random_id_pairs(300, 8000)
    writer = ShardWriter(tmp_path, "part", LANGS, "uint16", shard_tokens=500)
    writer.add(encoded_chunk(pairs[:200], lines[:200]))
    first = writer.close()
    before = {p.name: p.read_bytes() for p in tmp_path.glob("part.*.bin")}
    writer = ShardWriter(tmp_path, "part", LANGS, "uint16", shard_tokens=500, shards=first)
    assert writer.close() == first  # nothing added: no shard added
    writer = ShardWriter(tmp_path, "part", LANGS, "uint16", shard_tokens=500, shards=first)
    writer.add(encoded_chunk(pairs[200:], lines[200:]))
    shards = writer.close()
    assert shards[: len(first)] == first and sum(shards) == 300
    assert all((tmp_path / name).read_bytes() == data for name, data in before.items())  # untouched
    split = ShardedSplit(tmp_path, "part", LANGS, "uint16", shards)
    assert [split.pair(i)[0].tolist() for i in range(300)] == [a for a, _ in pairs]
    assert [split.lines(i) for i in range(300)] == lines


def test_an_empty_split_is_one_empty_shard(tmp_path):
    shard_pairs = ShardWriter(tmp_path, "val", LANGS, "uint16", 1000).close()
    assert shard_pairs == [0]
    split = ShardedSplit(tmp_path, "val", LANGS, "uint16", shard_pairs)
    assert len(split) == 0 and split.src_lengths.tolist() == []


def test_a_truncated_shard_is_named(tmp_path):
    pairs, lines = random_id_pairs(50, 100)
    writer = ShardWriter(tmp_path, "train", LANGS, "uint16", 10_000)
    writer.add(encoded_chunk(pairs, lines))
    shard_pairs = writer.close()
    with open(tmp_path / "train.00000.tgt.bin", "r+b") as f:
        f.truncate(10)
    with pytest.raises(DamagedShard, match="5 ids, its index says") as e:
        ShardedSplit(tmp_path, "train", LANGS, "uint16", shard_pairs)
    assert e.value.filename.endswith("train.00000.tgt.bin")
    with pytest.raises(DamagedShard, match="index entries, the manifest says"):
        ShardedSplit(tmp_path, "train", LANGS, "uint16", [49])


def test_a_corpus_larger_than_a_shard_spans_shards_and_encodes_as_one(tmp_path, corpus_dir, monkeypatch):
    """Preprocessing in several worker processes, in chunks, into many shards gives the ids
    that encoding the whole split at once gives."""
    monkeypatch.setattr(preprocess, "CHUNK_PAIRS", 70)  # several chunks per worker
    path = write_config(
        tmp_path / "sh.yaml",
        tmp_path,
        corpus_dir,
        data={"shard_tokens": 2000},
        tokenizer={"kind": "sentencepiece", "vocab_size": 120, "joint": True},
    )
    cfg = load_config(str(path))
    prepared, _ = prepare(cfg)
    train = prepared.split("train")
    assert len(prepared.manifest.shards["train"]) > 3 and len(train) == prepared.manifest.splits["train"].pairs
    tok = prepared.tokenizers
    sources, targets = prepared.text("train", "de"), prepared.text("train", "en")
    assert [train.pair(i)[0].tolist() for i in range(len(train))] == tok.src.encode_batch(sources)
    assert [train.pair(i)[1].tolist() for i in range(len(train))] == tok.tgt.encode_batch(targets)
    assert [train.lines(i) for i in range(len(train))] == list(zip(sources, targets))


def test_a_folder_from_an_older_tfm_is_rebuilt(tmp_path, corpus_dir):
    cfg = load_config(str(write_config(tmp_path / "old.yaml", tmp_path, corpus_dir)))
    prepared, _ = prepare(cfg)
    manifest = json.loads((cfg.data_dir / "manifest.json").read_text())
    manifest["format"] = 1  # as tfm wrote before shards; its fingerprint then differed too
    manifest["fingerprint"] = "0" * 64
    (cfg.data_dir / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(TfmError, match="made by an older tfm"):
        load_prepared(cfg)
    assert prepare(cfg)[1]  # rebuilt
    assert len(load_prepared(cfg).split("train")) == prepared.manifest.splits["train"].pairs
