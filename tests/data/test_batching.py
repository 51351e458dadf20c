"""data/batching.py: encoded splits, length-bucketed batch plans, collation into padded tensors."""

from __future__ import annotations

import torch

from transformer_cli.data.batching import EncodedSplit, collate, plan_batches
from transformer_cli.data.vocab import EOS, PAD, SOS


def _split() -> EncodedSplit:
    return EncodedSplit.from_lists([[10, 11, 12], [13], [14, 15]], [[20, 21], [22, 23, 24, 25], [26]])


def test_encoded_split_pairs_lengths_and_file_round_trip(tmp_path):
    split = _split()
    assert len(split) == 3
    assert split.src_lengths.tolist() == [3, 1, 2] and split.tgt_lengths.tolist() == [2, 4, 1]
    src, tgt = split.pair(1)
    assert src.tolist() == [13] and tgt.tolist() == [22, 23, 24, 25]
    split.save(tmp_path / "s.pt")
    loaded = EncodedSplit.load(tmp_path / "s.pt")
    assert all(torch.equal(getattr(loaded, k), getattr(split, k))
               for k in ("src", "src_offsets", "tgt", "tgt_offsets"))


def test_collate_adds_specials_pads_and_counts_target_tokens():
    b = collate(_split(), [0, 1])
    assert b.src.tolist() == [[10, 11, 12, EOS], [13, EOS, PAD, PAD]]
    # `<sos> ... <eos>` padded, then shifted: a shorter target's <eos> stays in tgt_in, where
    # its tgt_out position is PAD (no loss).
    assert b.tgt_in.tolist() == [[SOS, 20, 21, EOS, PAD], [SOS, 22, 23, 24, 25]]
    assert b.tgt_out.tolist() == [[20, 21, EOS, PAD, PAD], [22, 23, 24, 25, EOS]]
    assert b.n_tokens == 3 + 5 and b.src.dtype == torch.int64


def test_collate_caps_both_sides_to_max_len_with_their_specials():
    b = collate(_split(), [1], max_len=3)
    assert b.src.tolist() == [[13, EOS]]
    assert b.tgt_in.tolist() == [[SOS, 22, 23]] and b.tgt_out.tolist() == [[22, 23, EOS]]


def test_batch_plans():
    g = torch.Generator().manual_seed(0)
    src, tgt = torch.randint(1, 40, (500,), generator=g), torch.randint(1, 40, (500,), generator=g)
    plan = plan_batches(src, tgt, batch_size=None, batch_tokens=400, shuffle=True, seed=1, epoch=0)
    assert sorted(i for b in plan for i in b) == list(range(500))
    for b in plan:
        assert len(b) * int(max(max(src[i], tgt[i]) for i in b) + 2) <= 400 or len(b) == 1
    assert plan == plan_batches(src, tgt, batch_size=None, batch_tokens=400, shuffle=True, seed=1, epoch=0)
    assert plan != plan_batches(src, tgt, batch_size=None, batch_tokens=400, shuffle=True, seed=1, epoch=1)
    by_count = plan_batches(src, tgt, batch_size=64, batch_tokens=None, shuffle=False)
    assert [len(b) for b in by_count] == [64] * 7 + [52]

    def padded(plan):
        return sum(len(b) * max(int(tgt[i]) for i in b) for b in plan)

    unsorted = [list(range(i, min(i + 64, 500))) for i in range(0, 500, 64)]
    assert padded(by_count) - int(tgt.sum()) < (padded(unsorted) - int(tgt.sum())) / 5


def test_an_empty_split_plans_no_batches():
    empty = torch.zeros(0, dtype=torch.int64)
    assert plan_batches(empty, empty, batch_size=8, batch_tokens=None, shuffle=True) == []
