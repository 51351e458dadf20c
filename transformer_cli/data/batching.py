"""Encoded parallel data on disk, length-bucketed batch plans, and collation into tensors.

An `EncodedSplit` stores all sentences of a split as two flat int32 tensors plus offsets
(compact, loadable with `torch.load(weights_only=True)`). A batch plan is a list of index
arrays; it depends only on (lengths, seed, epoch), so a resumed run replays the same
batches in the same order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from ..fsutil import atomic_torch_save
from .vocab import EOS, PAD, SOS


def _flatten(seqs: Sequence[Sequence[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    lengths = torch.tensor([len(s) for s in seqs], dtype=torch.int64)
    offsets = torch.zeros(len(seqs) + 1, dtype=torch.int64)
    torch.cumsum(lengths, 0, out=offsets[1:])
    flat = torch.tensor([i for s in seqs for i in s], dtype=torch.int32)
    return flat, offsets


@dataclass
class EncodedSplit:
    """Token ids of one split (without `<sos>`/`<eos>`), source and target side."""

    src: torch.Tensor  # [total_src_tokens] int32
    src_offsets: torch.Tensor  # [n + 1] int64
    tgt: torch.Tensor
    tgt_offsets: torch.Tensor

    @classmethod
    def from_lists(cls, src: Sequence[Sequence[int]], tgt: Sequence[Sequence[int]]) -> EncodedSplit:
        assert len(src) == len(tgt)
        return cls(*_flatten(src), *_flatten(tgt))

    def __len__(self) -> int:
        return len(self.src_offsets) - 1

    @property
    def src_lengths(self) -> torch.Tensor:
        return self.src_offsets[1:] - self.src_offsets[:-1]

    @property
    def tgt_lengths(self) -> torch.Tensor:
        return self.tgt_offsets[1:] - self.tgt_offsets[:-1]

    def pair(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        s0, s1 = self.src_offsets[i : i + 2].tolist()
        t0, t1 = self.tgt_offsets[i : i + 2].tolist()
        return self.src[s0:s1], self.tgt[t0:t1]

    def save(self, path: Path) -> None:
        atomic_torch_save(path, {"src": self.src, "src_offsets": self.src_offsets,
                                 "tgt": self.tgt, "tgt_offsets": self.tgt_offsets})

    @classmethod
    def load(cls, path: Path) -> EncodedSplit:
        d = torch.load(path, weights_only=True)
        return cls(d["src"], d["src_offsets"], d["tgt"], d["tgt_offsets"])


@dataclass
class Batch:
    """One padded batch. `tgt_in` starts with `<sos>`, `tgt_out` ends with `<eos>`."""

    src: torch.Tensor  # [batch, src_len] int64, PAD-padded, ends with <eos>
    tgt_in: torch.Tensor  # [batch, tgt_len]
    tgt_out: torch.Tensor  # [batch, tgt_len]
    n_tokens: int  # non-pad target tokens, for loss normalisation and throughput

    def to(self, device: torch.device) -> Batch:
        non_blocking = device.type == "cuda"
        return Batch(self.src.to(device, non_blocking=non_blocking),
                     self.tgt_in.to(device, non_blocking=non_blocking),
                     self.tgt_out.to(device, non_blocking=non_blocking), self.n_tokens)


def pad_batch(seqs: Sequence[torch.Tensor]) -> torch.Tensor:
    """Stack 1-D id tensors into [batch, longest], padding with PAD."""
    return torch.nn.utils.rnn.pad_sequence([s.long() for s in seqs], batch_first=True,
                                           padding_value=PAD)


def collate(split: EncodedSplit, indices: Sequence[int], max_len: int | None = None,
            pin_memory: bool = False) -> Batch:
    """Pad the pairs at `indices`: source gets `<eos>`, target `<sos>`…`<eos>`.

    `max_len` caps each side (including the added specials) to the model's positions.
    """
    eos, sos = torch.tensor([EOS], dtype=torch.int32), torch.tensor([SOS], dtype=torch.int32)
    limit = None if max_len is None else max_len - 1  # room for the added <sos> or <eos>
    srcs, tgts = [], []
    for i in indices:
        s, t = split.pair(int(i))
        srcs.append(torch.cat([s[:limit], eos]))
        tgts.append(torch.cat([sos, t[:limit], eos]))
    src = pad_batch(srcs)
    tgt = pad_batch(tgts)
    tgt_in, tgt_out = tgt[:, :-1], tgt[:, 1:]
    if pin_memory:
        src, tgt_in, tgt_out = src.pin_memory(), tgt_in.pin_memory(), tgt_out.pin_memory()
    n_tokens = int((tgt_out != PAD).sum())
    return Batch(src, tgt_in, tgt_out, n_tokens)


def epoch_seed(seed: int, epoch: int) -> int:
    """A seed of its own for each (run seed, epoch): every per-epoch random choice (the batch
    plan, source noise, subword sampling) starts from it, so an epoch replays exactly."""
    return seed * 100_003 + epoch


def plan_batches(src_lengths: torch.Tensor, tgt_lengths: torch.Tensor, *,
                 batch_size: int | None, batch_tokens: int | None, shuffle: bool, seed: int = 0,
                 epoch: int = 0) -> list[list[int]]:
    """Group sentence indices into batches of similar length.

    Sentences are sorted by (target, source) length, with a seeded shuffle first so that
    equal lengths mix differently each epoch; consecutive sentences then fill a batch up to
    `batch_size` sentences, or up to `batch_tokens` padded tokens (the longer side, plus
    the added `<sos>`/`<eos>`, times the number of sentences). With `shuffle`, the batch
    order is shuffled too. The result depends only on the arguments.
    """
    n = len(src_lengths)
    if n == 0:
        return []
    gen = torch.Generator().manual_seed(epoch_seed(seed, epoch))
    order = torch.randperm(n, generator=gen) if shuffle else torch.arange(n)
    key = tgt_lengths[order] * (int(src_lengths.max()) + 1) + src_lengths[order]
    order = order[torch.sort(key, stable=True).indices]
    longest = (torch.maximum(src_lengths, tgt_lengths) + 2)[order].tolist()
    batches: list[list[int]] = []
    current: list[int] = []
    widest = 0
    for idx, length in zip(order.tolist(), longest):
        wider = max(widest, length)
        full = (len(current) >= batch_size) if batch_size else (wider * (len(current) + 1) > batch_tokens)
        if current and full:
            batches.append(current)
            current, wider = [], length
        current.append(idx)
        widest = wider
    if current:
        batches.append(current)
    if shuffle:
        perm = torch.randperm(len(batches), generator=gen).tolist()
        batches = [batches[i] for i in perm]
    return batches
