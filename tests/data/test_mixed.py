"""data/mixed.py: prepared sources as one split when batches are drawn: copies, tags, the
order of the corpus written out in full, and what the loader and its workers need of it."""

from __future__ import annotations

import pickle

import numpy as np
from helpers import encoded_chunk, random_id_pairs

from transformer_cli.data.batching import plan_batches
from transformer_cli.data.mixed import MixedSplit, Source
from transformer_cli.data.shards import ShardedSplit, ShardWriter

LANGS = ("de", "en")
TAG = "\ue000"


def _split(folder, name, n, seed):
    pairs, lines = random_id_pairs(n, 8000, seed)
    writer = ShardWriter(folder, name, LANGS, "uint16", shard_tokens=200)
    writer.add(encoded_chunk(pairs, lines))
    return ShardedSplit(folder, name, LANGS, "uint16", writer.close()), pairs, lines


def test_sources_stand_their_copies_in_order_with_the_tag_in_front(tmp_path):
    real, real_pairs, real_lines = _split(tmp_path, "train", 40, seed=1)
    made, made_pairs, made_lines = _split(tmp_path, "back_translation", 25, seed=2)
    mixed = MixedSplit([Source("train", real, 2), Source("back_translation", made, 1, TAG, (7, 3))])
    assert len(mixed) == 2 * 40 + 25
    written = [*real_pairs, *real_pairs, *[([7, 3, *a], b) for a, b in made_pairs]]  # the corpus written out
    assert [(s.tolist(), t.tolist()) for s, t in (mixed.pair(i) for i in range(len(mixed)))] == written
    assert [mixed.lines(i) for i in range(len(mixed))] == [
        *real_lines,
        *real_lines,
        *((f"{TAG} {a}", b) for a, b in made_lines),
    ]
    assert mixed.src_lengths.tolist() == [len(a) for a, _ in written]
    assert mixed.tgt_lengths.tolist() == [len(b) for _, b in written]
    # the batch plan of the mix is the plan of that corpus: the same lengths
    corpus_src = np.array([len(a) for a, _ in written])
    corpus_tgt = np.array([len(b) for _, b in written])
    for epoch in (0, 1):
        ours = plan_batches(
            mixed.src_lengths, mixed.tgt_lengths, batch_size=None, batch_tokens=60, shuffle=True, epoch=epoch
        )
        theirs = plan_batches(corpus_src, corpus_tgt, batch_size=None, batch_tokens=60, shuffle=True, epoch=epoch)
        assert [b.tolist() for b in ours] == [b.tolist() for b in theirs]
    again = pickle.loads(pickle.dumps(mixed))  # as a spawned DataLoader worker receives it
    assert again.pair(90)[0].tolist() == mixed.pair(90)[0].tolist() and again.lines(85) == mixed.lines(85)


def test_copies_and_tags_change_nothing_on_disk_and_empty_sources_drop_out(tmp_path):
    real, real_pairs, _ = _split(tmp_path, "train", 10, seed=1)
    made, made_pairs, _ = _split(tmp_path, "forward_translation", 5, seed=2)
    empty, _, _ = _split(tmp_path, "back_translation", 0, seed=3)
    files = {p: p.stat().st_mtime_ns for p in tmp_path.iterdir()}
    alone = MixedSplit(
        [Source("train", real, 0), Source("back_translation", empty, 1), Source("forward_translation", made, 3)]
    )
    assert len(alone) == 15 and [alone.pair(i)[1].tolist() for i in range(15)] == [b for _, b in made_pairs] * 3
    assert [s.name for s in alone.sources] == ["forward_translation"]
    assert {p: p.stat().st_mtime_ns for p in tmp_path.iterdir()} == files
    assert set(alone.shard_paths([0, 14])) == {
        tmp_path / "forward_translation.00000.src.bin",
        tmp_path / "forward_translation.00000.tgt.bin",
    }
    assert alone.damage() is None
    (tmp_path / "forward_translation.00000.src.bin").write_bytes(b"")
    assert alone.damage() is not None  # a part's shard cut short is named like a split's
