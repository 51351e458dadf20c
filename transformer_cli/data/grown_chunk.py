"""What a vocabulary-growing night's preprocessing workers do to a chunk of input pairs
(data/grown_folder.py): find the pairs with a side whose normalized text holds an added piece
(tokenizers/growth_reach.py: one search of the chunk's text), encode those alone with the grown
tokenizers, take every other pair's ids from the folder's shards (the grown tokenizers encode
them as the folder's did), and return the chunk's kept pairs, in order, as a whole build's
worker does (data/encoding.py `encode_chunk`): ids, lines, the pairs left out as too long,
unknown ids, and the kept sources' spellings when the truecaser is counted.

The main process says which of the folder's pairs each input pair is (`Job.held`); the
workers read the folder's shards through memory maps (pages the processes share).
"""

from __future__ import annotations

import itertools
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..contracts.tokenizer import Chunk
from ..tokenizers.growth_reach import Reach
from ..tokenizers.pair import TokenizerPair
from ..tokenizers.subword import SubwordTokenizer
from ..tokenizers.truecase import spelling_counts
from .encoding import EncodedResult, lines_bytes
from .prepared import Prepared
from .shards import EncodedChunk

Ids = tuple[np.ndarray, np.ndarray]  # one side of some pairs: flat ids, [n + 1] int64 offsets


@dataclass(frozen=True)
class Job:
    """A chunk of a split's input pairs, which of the folder's pairs each one is, and how the
    split is encoded."""

    chunk: Chunk
    split: str  # the folder's split (or part) they belong to
    held: np.ndarray  # [n] int64: the folder's pair of `split` each input pair is (-1: left out as too long)
    max_len: int | None  # pairs with a longer side are left out (training splits and parts)
    spellings: bool  # count the kept sources' spellings (the corpus's training split)


@dataclass
class _Work:
    """A worker's: the grown tokenizers, what they added, and the folder as it is."""

    pair: TokenizerPair
    reaches: tuple[Reach, Reach]
    before: Prepared
    dtype: str  # of the new folder's ids
    shards: dict[str, list[tuple[Ids, Ids]]] = field(default_factory=dict)  # per split: each shard's, source and target
    starts: dict[str, np.ndarray] = field(default_factory=dict)  # per split: [shards + 1] each shard's first pair


_work: _Work | None = None


def setup(state: dict[str, Any], added: tuple[list[str], list[str]], before: Prepared, dtype: str) -> None:
    """Per process: the grown tokenizers (`state`) and their `added` pieces (source, target),
    and `before`, the folder encoded with the tokenizers they grew from."""
    global _work
    pair = TokenizerPair.from_state(state)
    for tok in (pair.src, pair.tgt):
        tok.set_threads(1)  # the pool is the parallelism
    src, tgt = pair.src, pair.tgt
    assert isinstance(src, SubwordTokenizer) and isinstance(tgt, SubwordTokenizer)  # (grown_folder.regrowable)
    _work = _Work(pair, (Reach(src, added[0]), Reach(tgt, added[1])), before, dtype)


def encode_grown(job: Job) -> tuple[EncodedResult, int]:
    """The chunk's kept pairs, in order (see the module docstring), and how many of its pairs
    were encoded again."""
    assert _work is not None, "setup() first"
    sources, targets = job.chunk
    hit = _work.reaches[0].touched(sources)
    rest = np.flatnonzero(~hit)  # the targets of these alone are searched
    hit[rest[_work.reaches[1].touched([targets[i] for i in rest])]] = True
    touched = np.flatnonzero(hit)
    src_new = _flat(_work.pair.src.encode_batch([sources[i] for i in touched]))
    tgt_new = _flat(_work.pair.tgt.encode_batch([targets[i] for i in touched]))
    fits = np.ones(len(touched), dtype=bool)
    if job.max_len is not None:
        fits = (np.diff(src_new[1]) <= job.max_len) & (np.diff(tgt_new[1]) <= job.max_len)
    new = np.zeros(len(sources), dtype=bool)
    new[touched[fits]] = True
    old = job.held >= 0
    old[touched] = False
    kept = np.flatnonzero(new | old)
    src_old, tgt_old = _old_ids(job.split, job.held[old])
    # each kept pair's place in (the old pairs' ids, then every touched pair's)
    order = np.where(old[kept], np.cumsum(old[kept]) - 1, np.count_nonzero(old) + np.searchsorted(touched, kept))
    src, src_len = take(joined(src_old, src_new), order)
    tgt, tgt_len = take(joined(tgt_old, tgt_new), order)
    (src_text, src_bytes), (tgt_text, tgt_bytes) = (lines_bytes([side[i] for i in kept]) for side in job.chunk)
    dtype = _work.dtype
    chunk = EncodedChunk(
        src.astype(dtype), src_len, tgt.astype(dtype), tgt_len, src_text, src_bytes, tgt_text, tgt_bytes
    )
    unknown = (int((src == _work.pair.src.ids.unk).sum()), int((tgt == _work.pair.tgt.ids.unk).sum()))
    spellings = spelling_counts(sources[i] for i in kept) if job.spellings else Counter[str]()
    return EncodedResult(chunk, len(sources) - len(kept), unknown, spellings), len(touched)


def _flat(ids: list[list[int]]) -> Ids:
    lengths = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
    offsets = _offsets(lengths)
    return np.fromiter(itertools.chain.from_iterable(ids), dtype=np.int64, count=int(offsets[-1])), offsets


def _offsets(lengths: np.ndarray) -> np.ndarray:
    """[n] lengths -> [n + 1] int64 offsets."""
    out = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=out[1:])
    return out


def _old_ids(split: str, index: np.ndarray) -> tuple[Ids, Ids]:
    """The folder's pairs `index` (ascending) of `split`: their ids, source and target."""
    assert _work is not None, "setup() first"
    if split not in _work.shards:
        shards = _work.before.split(split).shards
        _work.shards[split] = [((s.src, s.src_offsets), (s.tgt, s.tgt_offsets)) for s in shards]
        _work.starts[split] = _offsets(np.array([len(s) for s in shards], dtype=np.int64))
    starts = _work.starts[split]
    bounds = np.searchsorted(index, starts)  # index[bounds[k]:bounds[k + 1]] lie in shard k
    taken: tuple[list[tuple[np.ndarray, np.ndarray]], list[tuple[np.ndarray, np.ndarray]]] = ([], [])
    for k in np.flatnonzero(np.diff(bounds)):
        local = index[bounds[k] : bounds[k + 1]] - starts[k]
        for side, ids in zip(taken, _work.shards[split][k]):
            side.append(take(ids, local))
    src, tgt = (
        (np.concatenate([t[0] for t in side]), _offsets(np.concatenate([t[1] for t in side])))
        if side
        else (np.zeros(0, dtype=np.int64), np.zeros(1, dtype=np.int64))
        for side in taken
    )
    return src, tgt


def joined(first: Ids, then: Ids) -> Ids:
    """The pairs of `first`, then those of `then`."""
    flat = np.concatenate([first[0].astype(np.int64, copy=False), then[0].astype(np.int64, copy=False)])
    return flat, _offsets(np.concatenate([np.diff(first[1]), np.diff(then[1])]))


def take(ids: Ids, index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pairs `index` of `ids`, in that order: (their ids, back to back, int64; [len(index)] lengths)."""
    flat, offsets = ids
    begin = offsets[index].astype(np.int64)
    lengths = offsets[index + 1].astype(np.int64) - begin
    ends = np.cumsum(lengths)
    position = np.repeat(begin - (ends - lengths), lengths) + np.arange(int(ends[-1]) if len(ends) else 0)
    return np.asarray(flat[position], dtype=np.int64), lengths
