"""Training sources mixed when batches are drawn: `MixedSplit` shows several prepared splits
(the real pairs, and each source of synthetic pairs: data/preprocess.py encodes each into its
own shards) as one split, each source repeated its number of copies, a source's tag put in
front of its sources as the batch is read.

Pair i of the mix is found by arithmetic: the sources stand one after the other, each
`copies` times, so changing a source's copies or its tag changes what batches are drawn
and re-encodes nothing. The order is the one a corpus written out in full would have (the
real pairs `copies` times, then each source), so the batch plan of a mix equals the plan of
that corpus: the same lengths give the same plan (data/batching.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..tokenizers.text_marks import tagged
from .shards import DamagedShard, ShardedSplit


@dataclass(frozen=True)
class Source:
    """One prepared source in a mix: its split, how many times it stands in an epoch, and the
    tag its sources carry (the mark's text and its ids under the source tokenizer)."""

    name: str
    split: ShardedSplit
    copies: int
    tag: str | None = None
    tag_ids: tuple[int, ...] = ()


class MixedSplit:
    """Sources as one split (see the module docstring): what batching and augmentation read of
    a split (`TokenPairs`, `lines`, `shard_paths`, `damage`)."""

    def __init__(self, sources: Sequence[Source]):
        self.sources = [s for s in sources if s.copies and len(s.split)]
        sizes = np.array([len(s.split) * s.copies for s in self.sources], dtype=np.int64)
        self._starts = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)  # [sources + 1]
        self._lengths: tuple[np.ndarray, np.ndarray] | None = None

    def __getstate__(self) -> list[Source]:
        """Pickled as its sources (whose splits pickle as where they lie), without the lengths."""
        return self.sources

    def __setstate__(self, sources: list[Source]) -> None:
        MixedSplit.__init__(self, sources)

    def __len__(self) -> int:
        return int(self._starts[-1])

    @property
    def starts(self) -> np.ndarray:
        """[sources + 1] int64: where each source's copies begin in the mix, and its length."""
        return self._starts

    def source(self, i: int) -> str:
        return self._locate(i)[0].name

    def _locate(self, i: int) -> tuple[Source, int]:
        """The source of pair `i` and the pair's index in that source's split."""
        k = int(np.searchsorted(self._starts, i, side="right")) - 1
        source = self.sources[k]
        return source, (i - int(self._starts[k])) % len(source.split)

    def _both_lengths(self) -> tuple[np.ndarray, np.ndarray]:
        if self._lengths is None:  # int32, like a split's: 8 bytes a pair of the mix
            src = [np.tile(s.split.src_lengths + len(s.tag_ids), s.copies) for s in self.sources]
            tgt = [np.tile(s.split.tgt_lengths, s.copies) for s in self.sources]
            empty = np.zeros(0, dtype=np.int32)
            self._lengths = (
                np.concatenate(src or [empty]).astype(np.int32),
                np.concatenate(tgt or [empty]).astype(np.int32),
            )
        return self._lengths

    @property
    def src_lengths(self) -> np.ndarray:
        return self._both_lengths()[0]

    @property
    def tgt_lengths(self) -> np.ndarray:
        return self._both_lengths()[1]

    def pair(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """Pair `i`'s ids, the source's tag first."""
        source, j = self._locate(i)
        src, tgt = source.split.pair(j)
        if source.tag_ids:
            src = np.concatenate([np.asarray(source.tag_ids, dtype=src.dtype), src])
        return src, tgt

    def lines(self, i: int) -> tuple[str, str]:
        """Pair `i`'s raw lines, the source's tag first (as augmentation encodes them)."""
        source, j = self._locate(i)
        src, tgt = source.split.lines(j)
        return (tagged(source.tag, src) if source.tag else src), tgt

    def shard_paths(self, indices: Sequence[int] | np.ndarray) -> list[Path]:
        """The id files holding pairs `indices`."""
        by_source: dict[int, list[int]] = {}
        for i in indices:
            source, j = self._locate(int(i))
            by_source.setdefault(id(source), []).append(j)
        return [p for s in self.sources if id(s) in by_source for p in s.split.shard_paths(by_source[id(s)])]

    def damage(self) -> DamagedShard | OSError | None:
        """The first source's damage (see `ShardedSplit.damage`), or None."""
        return next((d for d in (s.split.damage() for s in self.sources) if d is not None), None)
