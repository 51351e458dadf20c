"""Length-bucketed batch plans, and collation of sentence pairs into padded tensors.

A batch plan is a list of index arrays into a split (data/shards.py); it depends only on
(lengths, seed, epoch), so a resumed run replays the same batches in the same order.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from ..tokenizers.vocab import Framing
from .shards import TokenPairs

IdPair = tuple[Sequence[int] | np.ndarray, Sequence[int] | np.ndarray]  # source ids, target ids


@dataclass
class Batch:
    """One padded batch. `tgt_in` starts with `<sos>`, `tgt_out` ends with `<eos>`."""

    src: torch.Tensor  # [batch, src_len] int64, <pad>-padded, ends with <eos>
    tgt_in: torch.Tensor  # [batch, tgt_len]
    tgt_out: torch.Tensor  # [batch, tgt_len]
    n_tokens: int  # non-pad target tokens, for loss normalisation and throughput

    def pin_memory(self) -> Batch:
        """The batch in page-locked memory, for fast copies to a GPU (a DataLoader with
        `pin_memory=True` calls this in its pinning thread)."""
        return Batch(self.src.pin_memory(), self.tgt_in.pin_memory(), self.tgt_out.pin_memory(), self.n_tokens)

    def to(self, device: torch.device) -> Batch:
        non_blocking = device.type == "cuda"
        return Batch(
            self.src.to(device, non_blocking=non_blocking),
            self.tgt_in.to(device, non_blocking=non_blocking),
            self.tgt_out.to(device, non_blocking=non_blocking),
            self.n_tokens,
        )


def pad_batch(seqs: Sequence[torch.Tensor], pad: int) -> torch.Tensor:
    """Stack 1-D id tensors into [batch, longest], padding with `pad`."""
    return torch.nn.utils.rnn.pad_sequence([s.long() for s in seqs], batch_first=True, padding_value=pad)


def collate_pairs(pairs: Sequence[IdPair], framing: Framing, max_positions: int | None = None) -> Batch:
    """Pad id pairs into a batch: the source gets `<eos>`, the target `<sos>`…`<eos>`, both
    `<pad>`, with `framing`'s ids.

    `max_positions` caps each side (including the added specials) to the model's positions.
    """
    s_ids, t_ids = framing.src, framing.tgt
    limit = None if max_positions is None else max_positions - 1  # room for the added <sos> or <eos>
    sources = [np.asarray(s)[:limit] for s, _ in pairs]
    targets = [np.asarray(t)[:limit] for _, t in pairs]
    src = np.full((len(pairs), max(map(len, sources), default=0) + 1), s_ids.pad, dtype=np.int64)
    tgt = np.full((len(pairs), max(map(len, targets), default=0) + 2), t_ids.pad, dtype=np.int64)
    tgt[:, 0] = t_ids.sos
    for row, (s, t) in enumerate(zip(sources, targets)):
        src[row, : len(s)] = s
        src[row, len(s)] = s_ids.eos
        tgt[row, 1 : len(t) + 1] = t
        tgt[row, len(t) + 1] = t_ids.eos
    tgt_tensor = torch.from_numpy(tgt)
    n_tokens = sum(len(t) + 1 for t in targets)  # every target token and its <eos>
    return Batch(torch.from_numpy(src), tgt_tensor[:, :-1], tgt_tensor[:, 1:], n_tokens)


def collate(
    split: TokenPairs, indices: Sequence[int] | np.ndarray, framing: Framing, max_positions: int | None = None
) -> Batch:
    """The pairs of `split` at `indices`, padded (see `collate_pairs`)."""
    return collate_pairs([split.pair(int(i)) for i in indices], framing, max_positions)


def epoch_seed(seed: int, epoch: int) -> int:
    """A seed of its own for each (run seed, epoch): every per-epoch random choice (the batch
    plan, source noise, subword sampling) starts from it, so an epoch replays exactly."""
    return seed * 100_003 + epoch


def batch_seed(seed: int, epoch: int, batch: int) -> int:
    """A 32-bit seed of its own for batch number `batch` of an epoch's plan: the augmentation
    of a batch depends on nothing else (not on the worker that makes it, nor on a restart)."""
    digest = hashlib.blake2b(f"{epoch_seed(seed, epoch)}:{batch}".encode(), digest_size=4).digest()
    return int.from_bytes(digest, "big")


def _token_budget_ends(longest: np.ndarray, budget: int) -> list[int]:
    """Where each batch ends in `longest` (padded lengths in plan order) when consecutive
    sentences fill a batch until one more would exceed `budget` padded tokens."""
    ends: list[int] = []
    count = widest = 0
    step = 1 << 16  # converted to Python ints a slice at a time: no list of every length
    for start in range(0, len(longest), step):
        for position, length in enumerate(longest[start : start + step].tolist(), start):
            wider = max(widest, length)
            if count and wider * (count + 1) > budget:
                ends.append(position)
                count, wider = 0, length
            count += 1
            widest = wider
    return ends


def within_budget(pairs: Sequence[IdPair], budget: int, max_positions: int | None = None) -> list[list[int]]:
    """`pairs` (positions in the list) cut into groups of at most `budget` padded tokens each,
    in (target, source) length order, by the planner's rule; one group, in the given order,
    when they all fit.
    For a batch whose augmented pairs grew past the budget it was planned for: one sentence
    that became much longer (a source in capitals) no longer widens all the others."""
    src = np.array([len(s) for s, _ in pairs], dtype=np.int64)
    tgt = np.array([len(t) for _, t in pairs], dtype=np.int64)
    if max_positions is not None:
        src, tgt = src.clip(max=max_positions - 1), tgt.clip(max=max_positions - 1)
    if (np.maximum(src, tgt).max(initial=0) + 2) * len(pairs) <= budget:
        return [list(range(len(pairs)))]
    order = np.lexsort((src, tgt))  # by target length, then source length; stable
    ends = _token_budget_ends((np.maximum(src, tgt) + 2)[order], budget)
    return [part.tolist() for part in np.split(order, ends)]


def plan_batches(
    src_lengths: np.ndarray,
    tgt_lengths: np.ndarray,
    *,
    batch_size: int | None,
    batch_tokens: int | None,
    shuffle: bool,
    seed: int = 0,
    epoch: int = 0,
) -> list[np.ndarray]:
    """Group sentence indices into batches of similar length.

    Sentences are sorted by (target, source) length, with a seeded shuffle first so that
    equal lengths mix differently each epoch; consecutive sentences then fill a batch up to
    `batch_size` sentences, or up to `batch_tokens` padded tokens (the longer side, plus
    the added `<sos>`/`<eos>`, times the number of sentences). With `shuffle`, the batch
    order is shuffled too. The result depends only on the arguments; it holds one int32 per
    sentence, never a Python object per sentence.
    """
    n = len(src_lengths)
    if n == 0:
        return []
    src_np = np.asarray(src_lengths, dtype=np.int64)
    tgt_np = np.asarray(tgt_lengths, dtype=np.int64)
    src, tgt = torch.from_numpy(src_np), torch.from_numpy(tgt_np)
    gen = torch.Generator().manual_seed(epoch_seed(seed, epoch))
    shuffled = torch.randperm(n, generator=gen) if shuffle else torch.arange(n)
    key = tgt[shuffled] * (int(src.max()) + 1) + src[shuffled]
    order = shuffled[torch.sort(key, stable=True).indices].numpy()
    order = order.astype(np.int32) if n < 2**31 else order  # kept for the epoch: 4 bytes a pair
    if batch_size:
        ends = list(range(batch_size, n, batch_size))
    elif batch_tokens:
        ends = _token_budget_ends((np.maximum(src_np, tgt_np) + 2)[order], batch_tokens)
    else:
        raise ValueError("plan_batches needs batch_size or batch_tokens")
    batches = np.split(order, ends)
    if shuffle:
        perm = torch.randperm(len(batches), generator=gen).tolist()
        batches = [batches[i] for i in perm]
    return batches
