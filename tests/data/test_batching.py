"""data/batching.py: length-bucketed batch plans, collation into padded tensors."""

from __future__ import annotations

import numpy as np
import torch

from transformer_cli.contracts.tokenizer import SpecialIds
from transformer_cli.data.batching import batch_seed, collate, plan_batches, within_budget
from transformer_cli.data.shards import EncodedSplit
from transformer_cli.tokenizers.vocab import EOS, PAD, SOS, TFM_IDS, Framing

FRAMING = Framing(TFM_IDS, TFM_IDS)


def _split() -> EncodedSplit:
    return EncodedSplit.from_lists([[10, 11, 12], [13], [14, 15]], [[20, 21], [22, 23, 24, 25], [26]])


def test_encoded_split_pairs_and_lengths():
    split = _split()
    assert len(split) == 3
    assert split.src_lengths.tolist() == [3, 1, 2] and split.tgt_lengths.tolist() == [2, 4, 1]
    src, tgt = split.pair(1)
    assert src.tolist() == [13] and tgt.tolist() == [22, 23, 24, 25]


def test_collate_adds_specials_pads_and_counts_target_tokens():
    b = collate(_split(), [0, 1], FRAMING)
    assert b.src.tolist() == [[10, 11, 12, EOS], [13, EOS, PAD, PAD]]
    # `<sos> ... <eos>` padded, then shifted: a shorter target's <eos> stays in tgt_in, where
    # its tgt_out position is PAD (no loss).
    assert b.tgt_in.tolist() == [[SOS, 20, 21, EOS, PAD], [SOS, 22, 23, 24, 25]]
    assert b.tgt_out.tolist() == [[20, 21, EOS, PAD, PAD], [22, 23, 24, 25, EOS]]
    assert b.n_tokens == 3 + 5 and b.src.dtype == torch.int64


def test_collate_frames_each_side_with_its_own_vocabularys_ids():
    framing = Framing(SpecialIds(unk=90, pad=91, sos=92, eos=93), SpecialIds(unk=0, pad=7, sos=8, eos=9))
    b = collate(_split(), [0, 1], framing)
    assert b.src.tolist() == [[10, 11, 12, 93], [13, 93, 91, 91]]
    assert b.tgt_in.tolist() == [[8, 20, 21, 9, 7], [8, 22, 23, 24, 25]]
    assert b.tgt_out.tolist() == [[20, 21, 9, 7, 7], [22, 23, 24, 25, 9]]


def test_collate_caps_both_sides_to_max_positions_with_their_specials():
    b = collate(_split(), [1], FRAMING, max_positions=3)
    assert b.src.tolist() == [[13, EOS]]
    assert b.tgt_in.tolist() == [[SOS, 22, 23]] and b.tgt_out.tolist() == [[22, 23, EOS]]


def test_batch_plans():
    g = torch.Generator().manual_seed(0)
    src, tgt = torch.randint(1, 40, (500,), generator=g), torch.randint(1, 40, (500,), generator=g)
    plan = plan_batches(src, tgt, batch_size=None, batch_tokens=400, shuffle=True, seed=1, epoch=0)
    assert sorted(int(i) for b in plan for i in b) == list(range(500))
    for b in plan:
        assert len(b) * int(max(max(src[i], tgt[i]) for i in b) + 2) <= 400 or len(b) == 1

    def same(a, b):
        return len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b))

    assert same(plan, plan_batches(src, tgt, batch_size=None, batch_tokens=400, shuffle=True, seed=1, epoch=0))
    assert not same(plan, plan_batches(src, tgt, batch_size=None, batch_tokens=400, shuffle=True, seed=1, epoch=1))
    # numpy lengths (a memory-mapped split's) plan the same batches as tensors
    assert same(
        plan, plan_batches(src.numpy(), tgt.numpy(), batch_size=None, batch_tokens=400, shuffle=True, seed=1, epoch=0)
    )
    by_count = plan_batches(src, tgt, batch_size=64, batch_tokens=None, shuffle=False)
    assert [len(b) for b in by_count] == [64] * 7 + [52]

    def padded(plan):
        return sum(len(b) * max(int(tgt[i]) for i in b) for b in plan)

    unsorted = [list(range(i, min(i + 64, 500))) for i in range(0, 500, 64)]
    assert padded(by_count) - int(tgt.sum()) < (padded(unsorted) - int(tgt.sum())) / 5


def test_an_empty_split_plans_no_batches():
    empty = torch.zeros(0, dtype=torch.int64)
    assert plan_batches(empty, empty, batch_size=8, batch_tokens=None, shuffle=True) == []


def test_batch_seeds_differ_by_seed_epoch_and_batch_and_fit_32_bits():
    seeds = {batch_seed(s, e, b) for s in (1, 2) for e in range(3) for b in range(200)}
    assert len(seeds) == 2 * 3 * 200 and all(0 <= x < 2**32 for x in seeds)
    assert batch_seed(1, 2, 3) == batch_seed(1, 2, 3)


def test_an_augmented_batch_grown_past_its_budget_is_cut_into_micro_batches_that_fit():
    short = [([5] * 8, [6] * 8) for _ in range(10)]  # 10 x (8 + 2) = 100 padded tokens
    assert within_budget(short, 100) == [list(range(10))]  # fits: one batch, order kept
    capitals = short[:4] + [([7] * 30, [6] * 8)] + short[4:]  # one source tripled in length
    parts = within_budget(capitals, 100)
    assert sorted(i for part in parts for i in part) == list(range(11))
    assert [4] in parts  # the long one alone: the others are not padded to 32
    for part in parts:
        assert len(part) * (max(len(capitals[i][0]) for i in part) + 2) <= 100 or len(part) == 1
    # lengths are counted as collate cuts them: max_positions 11 leaves 10 ids a side (+2 specials)
    assert within_budget(capitals, 11 * 12, max_positions=11) == [list(range(11))]
