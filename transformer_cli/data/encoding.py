"""Encoding a split: what preprocessing's worker processes do to a chunk of sentence pairs,
and what the main process adds up of their results.

`setup` is run once per worker (data/parallel.py) with the fitted tokenizers' state; then
`encode_chunk` turns a chunk into ids ready for a `ShardWriter`, dropping training pairs that
are too long and counting the source spellings the truecaser learns from. (What fitting
counts, each tokenizer kind counts itself: Tokenizer.fit.) `encode_split` runs the chunks
through a pool and writes them out in order, adding up `SplitStats`; `check_enough` holds the
sum to data.min_train_pairs.
"""

from __future__ import annotations

import itertools
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..config import Config
from ..contracts.tokenizer import Chunk
from ..errors import UsageError
from ..tokenizers.pair import TokenizerPair
from ..tokenizers.truecase import spelling_counts
from .manifest import Lengths, Rates, SplitSummary
from .shards import EncodedChunk, ShardWriter

if TYPE_CHECKING:
    from .parallel import ChunkPool


@dataclass
class EncodeSettings:
    """How a split is encoded."""

    dtype: str  # of the ids (shards.id_dtype)
    train_max_len: int | None = None  # pairs with a longer side are dropped (training only)
    count_spellings: bool = False  # count the kept sources' spellings (training only)


@dataclass
class EncodedResult:
    chunk: EncodedChunk
    too_long: int  # pairs dropped by train_max_len
    unknown: tuple[int, int]  # <unk> ids, source and target
    spellings: Counter[str] = field(default_factory=Counter)


_pair: TokenizerPair | None = None
_settings: EncodeSettings | None = None


def setup(pair_state: dict[str, Any], settings: EncodeSettings) -> None:
    """Per process: the tokenizers to encode with."""
    global _pair, _settings
    _settings = settings
    _pair = TokenizerPair.from_state(pair_state)
    for tok in (_pair.src, _pair.tgt):
        tok.set_threads(1)  # the pool is the parallelism


def _flat(ids: list[list[int]], dtype: str) -> tuple[np.ndarray, np.ndarray]:
    lengths = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
    flat = np.fromiter(itertools.chain.from_iterable(ids), dtype=dtype, count=int(lengths.sum()))
    return flat, lengths


def lines_bytes(lines: list[str]) -> tuple[bytes, np.ndarray]:
    """`lines` as a split's text file holds them (UTF-8, each ending in a line break), and [n]
    int64: each one's bytes."""
    encoded = [f"{line}\n".encode() for line in lines]
    return b"".join(encoded), np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))


def encode_chunk(chunk: Chunk) -> EncodedResult:
    """The chunk's pairs encoded (those with a side longer than `train_max_len` dropped)."""
    assert _pair is not None and _settings is not None, "setup() first"
    sources, targets = chunk
    src_ids, tgt_ids = _pair.src.encode_batch(sources), _pair.tgt.encode_batch(targets)
    too_long = 0
    if _settings.train_max_len is not None:
        limit = _settings.train_max_len
        kept = [i for i, (a, b) in enumerate(zip(src_ids, tgt_ids)) if len(a) <= limit and len(b) <= limit]
        too_long = len(src_ids) - len(kept)
        if too_long:
            src_ids, tgt_ids = [src_ids[i] for i in kept], [tgt_ids[i] for i in kept]
            sources, targets = [sources[i] for i in kept], [targets[i] for i in kept]
    (src, src_len), (tgt, tgt_len) = _flat(src_ids, _settings.dtype), _flat(tgt_ids, _settings.dtype)
    (src_text, src_bytes), (tgt_text, tgt_bytes) = lines_bytes(sources), lines_bytes(targets)
    return EncodedResult(
        EncodedChunk(src, src_len, tgt, tgt_len, src_text, src_bytes, tgt_text, tgt_bytes),
        too_long,
        (int((src == _pair.src.ids.unk).sum()), int((tgt == _pair.tgt.ids.unk).sum())),
        spelling_counts(sources) if _settings.count_spellings else Counter(),
    )


@dataclass
class SplitStats:
    """What the manifest says of an encoded split, added up chunk by chunk."""

    pairs: int = 0
    lengths: list[int] = field(default_factory=lambda: [0, 0])  # summed, source and target
    longest: list[int] = field(default_factory=lambda: [0, 0])
    unknown: list[int] = field(default_factory=lambda: [0, 0])
    too_long: int = 0
    spellings: Counter[str] = field(default_factory=Counter)  # words as spelled (truecaser)
    shards: list[int] = field(default_factory=list)

    def add(self, r: EncodedResult) -> None:
        c = r.chunk
        self.pairs += len(c)
        self.too_long += r.too_long
        for side, lengths in enumerate((c.src_lengths, c.tgt_lengths)):
            self.lengths[side] += int(lengths.sum())
            self.longest[side] = max(self.longest[side], int(lengths.max(initial=0)))
            self.unknown[side] += r.unknown[side]
        self.spellings.update(r.spellings)

    def summary(self) -> SplitSummary:
        def side(i: int) -> Lengths:
            return Lengths(round(self.lengths[i] / max(1, self.pairs), 2), self.longest[i])

        return SplitSummary(self.pairs, side(0), side(1), self.oov_rate())

    def oov_rate(self) -> Rates:
        return Rates(*(round(self.unknown[i] / max(1, self.lengths[i]), 5) for i in range(2)))


def encode_split(
    writer: ShardWriter,
    chunks: Iterator[Chunk],
    pool: ChunkPool,
    check_stop: Callable[[], None] | None,
    bar: Any,
    stats: SplitStats | None = None,
) -> SplitStats:
    """Encode `chunks` in `pool` and append them, in order, to `writer`; `stats` (of what the
    writer's split already holds) are added to."""
    stats = stats or SplitStats()
    for result in pool.map(encode_chunk, chunks, check_stop):
        writer.add(result.chunk)
        stats.add(result)
        bar.update(len(result.chunk) + result.too_long)
    stats.shards = writer.close()
    return stats


def check_enough(cfg: Config, train: SplitStats, empty: int, beside: int) -> None:
    """At least data.min_train_pairs training pairs, the corpus's and the parts' (`beside`)."""
    if train.pairs + beside < cfg.data.min_train_pairs:
        made = f", and {beside} made by translating text" if beside else ""
        raise UsageError(
            f"only {train.pairs} training pairs are left of "
            f"{train.pairs + train.too_long + empty} ({empty} empty, {train.too_long} "
            f"longer than data.train_max_len={cfg.data.train_max_len} tokens){made}; at least "
            f"data.min_train_pairs={cfg.data.min_train_pairs} are needed"
        )


def progress_bar(desc: str) -> Any:  # a tqdm bar
    from tqdm import tqdm

    return tqdm(desc=desc, unit="pair", disable=not sys.stdout.isatty(), leave=False, dynamic_ncols=True)
