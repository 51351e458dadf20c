"""Encoded splits as flat token arrays: in memory, or memory-mapped from shards on disk.

A split of n sentence pairs is stored like fairseq's binarized data or nanoGPT's `np.memmap`:
the token ids of every source sentence back to back in one flat array, the same for the
targets, and an index of where each pair starts. Reading pair i is two slices; nothing is
parsed and nothing is loaded: the operating system pages in what is read, and every process
on a machine (DDP ranks, DataLoader workers) shares those pages.

On disk a split is cut into shards of at most `data.shard_tokens` ids (both sides together),
so no file grows with the corpus. Shard k of a split is three raw little-endian files:

    {split}.{k:05d}.src.bin   source ids, back to back (dtype: the manifest's `id_dtype`,
                              uint16 for vocabularies up to 65,536, else int32)
    {split}.{k:05d}.tgt.bin   target ids
    {split}.{k:05d}.idx.bin   int64 [n_k + 1, 4]: per pair, where its ids start in the two .bin
                              files and where its line starts (in bytes) in the split's two
                              text files; the last row is where the shard ends

The raw text of the split stays in `{split}.{lang}.txt` (one line per kept pair): the index's
byte offsets make its lines readable at random too, which per-batch augmentation needs.
"""

from __future__ import annotations

import mmap
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Protocol

import numpy as np

INDEX_COLUMNS = 4  # src id offset, tgt id offset, src byte offset, tgt byte offset


class DamagedShard(ValueError):
    """A shard file that does not hold what the manifest or its index says."""

    def __init__(self, path: Path, reason: str):
        super().__init__(reason)
        self.filename = str(path)


def id_dtype(vocab_size: int) -> str:
    """The narrowest dtype that holds every id of a vocabulary of `vocab_size`."""
    return "uint16" if vocab_size <= 1 << 16 else "int32"


class TokenPairs(Protocol):
    """What batching needs of a split: its size, its lengths and its pairs by index."""

    def __len__(self) -> int: ...

    @property
    def src_lengths(self) -> np.ndarray: ...  # [n] integers

    @property
    def tgt_lengths(self) -> np.ndarray: ...

    def pair(self, i: int) -> tuple[np.ndarray, np.ndarray]: ...  # ids without <sos>/<eos>


class TrainingSplit(TokenPairs, Protocol):
    """What training reads of its split (a `ShardedSplit`, or data/mixed.py's mix of them):
    besides the ids, the raw lines (augmentation), and which files hold pairs and whether they
    changed (the errors that name them)."""

    def lines(self, i: int) -> tuple[str, str]: ...

    def source(self, i: int) -> str:
        """The name of the source pair `i` comes from (a split's, or a mix's source's)."""
        ...

    def shard_paths(self, indices: Sequence[int] | np.ndarray) -> list[Path]: ...

    def damage(self) -> DamagedShard | OSError | None: ...


def _offsets(lengths: np.ndarray) -> np.ndarray:
    """[n] lengths -> [n + 1] int64 start offsets."""
    out = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=out[1:])
    return out


@dataclass
class EncodedSplit:
    """One shard's ids: flat source and target arrays with their [n + 1] offsets (in memory,
    or views of memory-mapped files)."""

    src: np.ndarray  # [total source ids]
    src_offsets: np.ndarray  # [n + 1] int64
    tgt: np.ndarray
    tgt_offsets: np.ndarray

    @classmethod
    def from_lists(cls, src: Sequence[Sequence[int]], tgt: Sequence[Sequence[int]]) -> EncodedSplit:
        assert len(src) == len(tgt)
        return cls(*_flatten(src), *_flatten(tgt))

    def __len__(self) -> int:
        return len(self.src_offsets) - 1

    @property
    def src_lengths(self) -> np.ndarray:
        return np.diff(self.src_offsets)

    @property
    def tgt_lengths(self) -> np.ndarray:
        return np.diff(self.tgt_offsets)

    def pair(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        return (
            self.src[self.src_offsets[i] : self.src_offsets[i + 1]],
            self.tgt[self.tgt_offsets[i] : self.tgt_offsets[i + 1]],
        )


def _flatten(seqs: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
    offsets = _offsets(np.fromiter((len(s) for s in seqs), dtype=np.int64, count=len(seqs)))
    flat = np.fromiter((i for s in seqs for i in s), dtype=np.int32, count=int(offsets[-1]))
    return flat, offsets


def shard_names(split: str, k: int) -> tuple[str, str, str]:
    """File names of shard `k` of `split`: source ids, target ids, index."""
    stem = f"{split}.{k:05d}"
    return f"{stem}.src.bin", f"{stem}.tgt.bin", f"{stem}.idx.bin"


def _map(path: Path, dtype: str) -> np.ndarray:
    """A read-only memory map of a raw array file (an empty file is an empty array)."""
    if path.stat().st_size == 0:
        return np.zeros(0, dtype=dtype)
    return np.memmap(path, dtype=dtype, mode="r")


_Where = tuple[Path, str, tuple[str, str], str, list[int]]  # a ShardedSplit's arguments


class ShardedSplit:
    """A prepared split, memory-mapped: its ids (through `pair`) and raw lines (through
    `lines`). Resident memory is the lengths (int32, 8 bytes a pair, made on first use) and
    the pages actually read."""

    def __init__(self, folder: Path, split: str, langs: tuple[str, str], dtype: str, shard_pairs: Sequence[int]):
        """Raises OSError or DamagedShard (both with the file's name) when a shard is missing or
        its size does not match the manifest's pair count (`shard_pairs`)."""
        self._args: _Where = folder, split, langs, dtype, list(shard_pairs)
        self.shards: list[EncodedSplit] = []
        self._text_offsets: list[np.ndarray] = []  # per shard: [n_k + 1, 2] byte offsets
        for k, n in enumerate(shard_pairs):
            src_name, tgt_name, idx_name = shard_names(split, k)
            index = _map(folder / idx_name, "int64")
            if index.size != (n + 1) * INDEX_COLUMNS:
                raise DamagedShard(
                    folder / idx_name, f"{index.size} index entries, the manifest says {(n + 1) * INDEX_COLUMNS}"
                )
            index = index.reshape(n + 1, INDEX_COLUMNS)
            shard = EncodedSplit(
                _map(folder / src_name, dtype), index[:, 0], _map(folder / tgt_name, dtype), index[:, 1]
            )
            for name, ids, ends in ((src_name, shard.src, index[-1, 0]), (tgt_name, shard.tgt, index[-1, 1])):
                if len(ids) != ends:
                    raise DamagedShard(folder / name, f"{len(ids)} ids, its index says {ends}")
            self.shards.append(shard)
            self._text_offsets.append(index[:, 2:])
        self._starts = _offsets(np.asarray(shard_pairs, dtype=np.int64))  # first pair of each shard
        self._text_paths = [folder / f"{split}.{lang}.txt" for lang in langs]
        self._text: list[mmap.mmap | bytes] | None = None
        self._lengths: tuple[np.ndarray, np.ndarray] | None = None

    def __getstate__(self) -> _Where:
        """Pickled as where it lies (for worker processes that are spawned, not forked): the
        receiving process maps the files itself instead of receiving a copy of them."""
        return self._args

    def __setstate__(self, args: _Where) -> None:
        ShardedSplit.__init__(self, *args)

    def __len__(self) -> int:
        return int(self._starts[-1])

    def _locate(self, i: int) -> tuple[int, int]:
        """(shard, index within it) of pair `i`."""
        k = int(np.searchsorted(self._starts, i, side="right")) - 1
        return k, i - int(self._starts[k])

    def _both_lengths(self) -> tuple[np.ndarray, np.ndarray]:
        if self._lengths is None:  # int32: 8 bytes a pair for both sides
            src, tgt = (
                np.concatenate([np.diff(offsets).astype(np.int32) for offsets in side])
                for side in ([s.src_offsets for s in self.shards], [s.tgt_offsets for s in self.shards])
            )
            self._lengths = (src, tgt)
        return self._lengths

    @property
    def src_lengths(self) -> np.ndarray:
        return self._both_lengths()[0]

    @property
    def tgt_lengths(self) -> np.ndarray:
        return self._both_lengths()[1]

    def pair(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        k, j = self._locate(i)
        return self.shards[k].pair(j)

    def shard_paths(self, indices: Sequence[int] | np.ndarray) -> list[Path]:
        """The id files (source and target) holding pairs `indices`."""
        folder, split = self._args[0], self._args[1]
        shards = sorted({self._locate(int(i))[0] for i in indices})
        return [folder / name for k in shards for name in shard_names(split, k)[:2]]

    def damage(self) -> DamagedShard | OSError | None:
        """What no longer matches in the files as they are now (a shard cut short or gone
        since the split was opened), or None: checked by their sizes, not read."""
        try:
            ShardedSplit(*self._args)
        except (DamagedShard, OSError) as e:
            return e
        return None

    def source(self, i: int) -> str:
        return str(self._args[1])

    def iter_lines(self) -> Iterator[tuple[bytes, bytes]]:
        """Every pair's source and target line as the folder keeps them (UTF-8, no newline),
        in order, read as a stream."""
        with open(self._text_paths[0], "rb") as src, open(self._text_paths[1], "rb") as tgt:
            for s, t in zip(src, tgt):
                yield s[:-1], t[:-1]

    def lines(self, i: int) -> tuple[str, str]:
        """The raw source and target line of pair `i`."""
        if self._text is None:
            self._text = [_map_bytes(p) for p in self._text_paths]
        k, j = self._locate(i)
        (s0, t0), (s1, t1) = self._text_offsets[k][j], self._text_offsets[k][j + 1]
        src, tgt = self._text
        # Each offset pair spans the line and its "\n".
        return src[s0 : s1 - 1].decode("utf-8"), tgt[t0 : t1 - 1].decode("utf-8")


def _map_bytes(path: Path) -> mmap.mmap | bytes:
    with open(path, "rb") as f:
        if f.seek(0, 2) == 0:
            return b""
        return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)


@dataclass
class EncodedChunk:
    """Consecutive pairs encoded by one worker, ready to be appended to a split."""

    src_ids: np.ndarray  # [sum of src lengths], the split's id dtype
    src_lengths: np.ndarray  # [n] int64
    tgt_ids: np.ndarray
    tgt_lengths: np.ndarray
    src_text: bytes  # the pairs' raw lines, each ending in "\n"
    src_line_bytes: np.ndarray  # [n] int64: bytes of each line with its "\n"
    tgt_text: bytes
    tgt_line_bytes: np.ndarray

    def __len__(self) -> int:
        return len(self.src_lengths)


class ShardWriter:
    """Appends encoded chunks to a split: its shards and its two text files. `close()` returns
    the number of pairs in each shard (for the manifest)."""

    def __init__(
        self,
        folder: Path,
        split: str,
        langs: tuple[str, str],
        dtype: str,
        shard_tokens: int,
        shards: Sequence[int] = (),
    ):
        """A new split; or, with `shards` (the pairs of each shard the split has), the split in
        `folder` continued: its text files are appended to, its shards kept as they are and
        new pairs put in new ones."""
        self.folder, self.split, self.dtype, self.shard_tokens = folder, split, dtype, shard_tokens
        mode = "ab" if shards else "wb"
        self._text_files = [open(folder / f"{split}.{lang}.txt", mode) for lang in langs]
        self._text_pos = [f.tell() for f in self._text_files]  # bytes of text before the next pair to index
        self._shard_pairs: list[int] = list(shards)
        self._open: tuple[BinaryIO, BinaryIO, BinaryIO] | None = None
        self._ids_in_shard = [0, 0]

    def add(self, chunk: EncodedChunk) -> None:
        for f, text in zip(self._text_files, (chunk.src_text, chunk.tgt_text)):
            f.write(text)
        tokens = np.cumsum(chunk.src_lengths + chunk.tgt_lengths)
        start = 0
        while start < len(chunk):
            if self._open is None:
                self._next_shard()
            used = sum(self._ids_in_shard)
            before = int(tokens[start - 1]) if start else 0
            # The longest run of whole pairs that still fits in this shard.
            end = int(np.searchsorted(tokens, self.shard_tokens - used + before, side="right"))
            if end <= start:
                if used:
                    self._next_shard()
                    continue
                end = start + 1  # a pair longer than a shard gets a shard of its own
            self._write(chunk, start, end)
            start = end

    def _next_shard(self) -> None:
        self._close_shard()
        names = shard_names(self.split, len(self._shard_pairs))
        src_file, tgt_file, idx_file = (open(self.folder / name, "wb") for name in names)
        self._open = (src_file, tgt_file, idx_file)
        self._shard_pairs.append(0)
        self._ids_in_shard = [0, 0]
        first = np.array([[0, 0, *self._text_pos]], dtype=np.int64)  # ids from 0, lines where they stand
        idx_file.write(first.tobytes())

    def _write(self, chunk: EncodedChunk, start: int, end: int) -> None:
        """Pairs [start, end) of `chunk` into the open shard."""
        assert self._open is not None, "add() opens a shard before writing"
        src_file, tgt_file, idx_file = self._open
        s_off, t_off = _offsets(chunk.src_lengths), _offsets(chunk.tgt_lengths)
        src_file.write(chunk.src_ids[s_off[start] : s_off[end]].astype(self.dtype, copy=False).tobytes())
        tgt_file.write(chunk.tgt_ids[t_off[start] : t_off[end]].astype(self.dtype, copy=False).tobytes())
        rows = np.empty((end - start, INDEX_COLUMNS), dtype=np.int64)  # where each pair ends
        rows[:, 0] = self._ids_in_shard[0] + np.cumsum(chunk.src_lengths[start:end])
        rows[:, 1] = self._ids_in_shard[1] + np.cumsum(chunk.tgt_lengths[start:end])
        rows[:, 2] = self._text_pos[0] + np.cumsum(chunk.src_line_bytes[start:end])
        rows[:, 3] = self._text_pos[1] + np.cumsum(chunk.tgt_line_bytes[start:end])
        idx_file.write(rows.tobytes())
        self._ids_in_shard = [int(rows[-1, 0]), int(rows[-1, 1])]
        self._text_pos = [int(rows[-1, 2]), int(rows[-1, 3])]
        self._shard_pairs[-1] += end - start

    def _close_shard(self) -> None:
        if self._open is not None:
            for f in self._open:
                f.close()
            self._open = None

    def close(self) -> list[int]:
        if not self._shard_pairs:  # an empty split still has one (empty) shard
            self._next_shard()
        self._close_shard()
        for f in self._text_files:
            f.close()
        return list(self._shard_pairs)
