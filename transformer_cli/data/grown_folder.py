"""A prepared folder encoded again for a growth of its tokenizers, pair by pair where needed.

A continued night that grows the published model's vocabulary (train.retrain.grow_vocabulary:
training/vocabulary_growth.py) first prepares its data with the parent's tokenizers, then asks
for it encoded with their growth (`GivenTokenizers` whose pieces extend the folder's). When the
folder holds today's inputs (its fingerprint) and parts, intact, only the pairs whose
encoding can change are encoded again: those with a side whose normalized text holds an added
piece (tokenizers/growth_reach.py says why no other can change, and when that cannot be known:
then the folder is built whole, as before). Every other pair keeps its ids, copied from the
folder's shards. Each split and part is read from its input files again, as a build reads it,
so a pair left out as longer than data.train_max_len can come back when the growth shortens
it; the folder's kept lines tell which pairs it holds. The result is what a folder built
whole with the grown tokenizers holds, id for id, summary for summary, and truecaser for
truecaser (counted from the kept sources again), written as a whole like any build
(`rewrite_folder`); train.log says how many pairs were encoded again.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..config import Config
from ..contracts.tokenizer import Chunk
from ..fsutil import file_record, file_sha256
from ..host.machine import available_cpus
from ..tokenizers.growth_reach import Reach, reach
from ..tokenizers.pair import TokenizerPair
from ..tokenizers.subword import SubwordTokenizer
from ..tokenizers.truecase import Truecaser, spelling_counts
from .corpus_append import corpus_record
from .encoding import EncodedResult, SplitStats, lines_bytes, progress_bar
from .freshness import GivenTokenizers, encoded_with
from .manifest import DataManifest, Dropped, VocabSizes, unknown_line
from .parallel import ChunkPool
from .parts import CHUNK_PAIRS, PartInput, part_chunks, parts_current, record_of, rewrite_folder
from .prepared import Prepared, verify_folder
from .shards import EncodedChunk, ShardedSplit, ShardWriter, id_dtype
from .sources import SPLITS, CorpusFile, iter_parallel, with_text

log = logging.getLogger("tfm")


def regrowable(
    cfg: Config, old: DataManifest, fingerprint: str, given: GivenTokenizers, parts: tuple[PartInput, ...]
) -> tuple[list[str], list[str]] | None:
    """The pieces `given` adds to the folder's tokenizers (source side, target side) when the
    folder can be encoded again pair by pair for them (see the module docstring); else None."""
    folder = cfg.data_dir
    if old.fingerprint != fingerprint or old.tokenizer_sha256 == given.digest or not parts_current(old, parts):
        return None
    try:
        before = TokenizerPair.load(folder)
    except (OSError, ValueError, KeyError, TypeError, RuntimeError):
        return None
    if before.joint != given.pair.joint or verify_folder(folder, old) is not None:
        return None
    sides = (reach(before.src, given.pair.src), reach(before.tgt, given.pair.tgt))
    if None in sides:
        return None
    for side in sides:
        if isinstance(side, str):
            log.info("vocabulary grew, but %s: every pair is encoded again", side)
    if not all(isinstance(side, Reach) for side in sides):
        return None
    src, tgt = (list(s.added) if isinstance(s, Reach) else [] for s in sides)  # (both are: above)
    return src, tgt


@dataclass
class _Work:
    """A worker's: the grown tokenizers, what they added, and how a split is encoded."""

    pair: TokenizerPair
    reaches: tuple[Reach, Reach]
    max_len: int | None  # pairs with a longer side are left out (training splits)
    spellings: bool  # count the kept sources' spellings (the corpus's training split)


_work: _Work | None = None


def _setup(state: dict[str, Any], added: tuple[list[str], list[str]], max_len: int | None, spellings: bool) -> None:
    global _work
    pair = TokenizerPair.from_state(state)
    for tok in (pair.src, pair.tgt):
        tok.set_threads(1)  # the pool is the parallelism
    src, tgt = pair.src, pair.tgt
    assert isinstance(src, SubwordTokenizer) and isinstance(tgt, SubwordTokenizer)  # (regrowable said so)
    _work = _Work(pair, (Reach(src, added[0]), Reach(tgt, added[1])), max_len, spellings)


@dataclass
class _Touched:
    """A chunk's pairs that hold an added piece, encoded with the grown tokenizers."""

    index: np.ndarray  # [m] int64: positions in the chunk
    src: list[list[int]]  # [m] ids
    tgt: list[list[int]]
    spellings: Counter[str]  # of the chunk's sources, but those encoded here too long to keep


def _encode_touched(chunk: Chunk) -> _Touched:
    assert _work is not None, "_setup() first"
    sources, targets = chunk
    index = np.flatnonzero(_work.reaches[0].touched(sources) | _work.reaches[1].touched(targets))
    src = _work.pair.src.encode_batch([sources[i] for i in index])
    tgt = _work.pair.tgt.encode_batch([targets[i] for i in index])
    spellings = Counter[str]()
    if _work.spellings:
        dropped = {int(i) for i, a, b in zip(index, src, tgt) if not _fits(a, b, _work.max_len)}
        spellings = spelling_counts(s for i, s in enumerate(sources) if i not in dropped)
    return _Touched(index, src, tgt, spellings)


def _fits(src: list[int], tgt: list[int], max_len: int | None) -> bool:
    return max_len is None or (len(src) <= max_len and len(tgt) <= max_len)


@dataclass
class _Count:
    touched: int = 0
    pairs: int = 0

    def __str__(self) -> str:
        return f"{self.touched:,} of {self.pairs:,}"


def regrow_folder(
    cfg: Config,
    old: DataManifest,
    files: list[CorpusFile],
    given: GivenTokenizers,
    added: tuple[list[str], list[str]],
    parts: tuple[PartInput, ...],
    check_stop: Callable[[], None] | None,
) -> DataManifest:
    """The folder encoded with `given` (the folder's tokenizers with `added` pieces), replaced
    as a whole: each split and part read from its files, its pairs that hold an added piece
    encoded again, the others' ids copied."""
    started, folder, langs = time.monotonic(), cfg.data_dir, old.langs
    pair = TokenizerPair(given.pair.src, given.pair.tgt, given.pair.joint)
    dtype = id_dtype(max(pair.src.vocab_size, pair.tgt.vocab_size))
    before = Prepared(folder, old)
    where = {(f.split, f.lang): f.path for f in files}
    path = {s: (where[s, langs[0]], where[s, langs[1]]) for s in SPLITS}
    kinds = {"train": (cfg.data.train_max_len, not pair.src.lowercase), "eval": (None, False)}
    kinds["parts"] = (cfg.data.train_max_len, False)
    counts: dict[str, _Count] = {}

    def build(work: Path) -> DataManifest:
        empty = {name: [0] for name in [*SPLITS, *old.parts]}
        chunks: dict[str, Iterator[Chunk]] = {
            "train": with_text(iter_parallel(*path["train"], CHUNK_PAIRS), empty["train"], cfg.data.limit_train),
            "val": iter_parallel(*path["val"], CHUNK_PAIRS),
            "test": iter_parallel(*path["test"], CHUNK_PAIRS),
            **{p.name: part_chunks(p.paths, (0, 0), empty[p.name]) for p in parts},
        }
        kind = {"train": "train", "val": "eval", "test": "eval", **{p.name: "parts" for p in parts}}
        dropped = {"train": old.dropped.too_long_train_pairs, **{n: r.too_long for n, r in old.parts.items()}}
        stats: dict[str, SplitStats] = {}
        with progress_bar(f"encoding the pairs that hold the {pair.src.kind} growth's pieces") as bar:
            for group, (max_len, spellings) in kinds.items():
                names = [name for name in chunks if kind[name] == group]
                if not names:
                    continue
                with ChunkPool(available_cpus(), _setup, (pair.state(), added, max_len, spellings)) as pool:
                    for name in names:
                        writer = ShardWriter(work, name, langs, dtype, cfg.data.shard_tokens)
                        counts[name] = _Count()
                        split = _Split(before.split(name), dropped.get(name, 0) > 0, pair, max_len)
                        stats[name] = split.encode(writer, chunks[name], pool, check_stop, bar, counts[name])
        if not pair.src.lowercase:  # the truecaser a whole build learns from the kept sources
            pair.recaser = Truecaser.from_counts(stats["train"].spellings)
        pair.save(work)
        (work / "config.yaml").write_text(encoded_with(cfg, given).to_yaml(), encoding="utf-8")
        log.info("%s", _line(added, counts))
        log.info("%s", unknown_line(stats["train"].oov_rate(), langs))
        train = [f for f in files if f.split == "train"]
        return dataclasses.replace(
            old,
            tokenizer=pair.src.kind,
            tokenizer_from=given.parent,
            vocab_size=VocabSizes(pair.src.vocab_size, pair.tgt.vocab_size),
            tokenizer_sha256=pair.vocabulary_digest(),
            id_dtype=dtype,
            shards={name: s.shards for name, s in stats.items()},
            splits={name: s.summary() for name, s in stats.items()},
            parts={n: record_of(r.inputs, stats[n], empty[n][0]) for n, r in old.parts.items()},
            dropped=Dropped(empty["train"][0], stats["train"].too_long),
            oov_rate_val=stats["val"].oov_rate(),
            corpus=corpus_record(stats["train"], empty["train"][0], train, langs),
            outputs={p.name: file_record(p, file_sha256(p)) for p in sorted(work.iterdir()) if p.is_file()},
            elapsed_s=round(time.monotonic() - started, 2),
        )

    return rewrite_folder(folder, build)


def _line(added: tuple[list[str], list[str]], counts: dict[str, _Count]) -> str:
    """train.log's line: what grew, and how many pairs were encoded again, split by split."""
    grew = len(added[0]) if added[0] == added[1] else len(added[0]) + len(added[1])
    total = _Count(sum(c.touched for c in counts.values()), sum(c.pairs for c in counts.values()))
    each = ", ".join(f"{name} {count}" for name, count in counts.items())
    return f"vocabulary grew by {grew} pieces: {total} pairs hold them, re-encoded ({each}); the others keep their ids"


class _Split:
    """A split encoded with the grown tokenizers from its input files: a pair the workers found
    no added piece in takes its ids from `old`, the folder's split. `aligned`: `old` left out
    pairs as too long, so which input pair each of its lines is must be found (by their text:
    equal pairs encode alike, so share their fate); else its lines are the input's, in order."""

    def __init__(self, old: ShardedSplit, aligned: bool, pair: TokenizerPair, max_len: int | None):
        self.old, self.pair, self.max_len = old, pair, max_len
        self.lines = old.iter_lines() if aligned else None
        self.next: tuple[bytes, bytes] | None = None
        self.at = 0  # the old split's next pair
        self.starts = np.cumsum([0, *(len(s) for s in old.shards)])  # [shards + 1] first pair of each

    def encode(
        self,
        writer: ShardWriter,
        chunks: Iterator[Chunk],
        pool: ChunkPool,
        check_stop: Callable[[], None] | None,
        bar: Any,
        count: _Count,
    ) -> SplitStats:
        stats, sent = SplitStats(), deque[Chunk]()

        def fed() -> Iterator[Chunk]:
            for chunk in chunks:
                sent.append(chunk)
                yield chunk

        for touched in pool.map(_encode_touched, fed(), check_stop):
            sources, targets = sent.popleft()
            result = self._chunk(sources, targets, touched)
            writer.add(result.chunk)
            stats.add(result)
            bar.update(len(sources))
            count.touched, count.pairs = count.touched + len(touched.index), count.pairs + len(sources)
        stats.shards = writer.close()
        return stats

    def _held(self, sources: list[str], targets: list[str]) -> np.ndarray:
        """[n] int64: the old split's pair each input pair is (-1: one it left out)."""
        if self.lines is None:
            self.at += len(sources)
            return np.arange(self.at - len(sources), self.at)
        out = np.full(len(sources), -1, dtype=np.int64)
        for i, (s, t) in enumerate(zip(sources, targets)):
            if self.next is None:
                self.next = next(self.lines, None)
            if self.next is not None and self.next == (s.encode(), t.encode()):
                out[i], self.at, self.next = self.at, self.at + 1, None
        return out

    def _chunk(self, sources: list[str], targets: list[str], touched: _Touched) -> EncodedResult:
        """The chunk's kept pairs, in order: encoded again where touched, else as they were."""
        held = self._held(sources, targets)
        fits = np.array([_fits(a, b, self.max_len) for a, b in zip(touched.src, touched.tgt)], dtype=bool)
        was = np.zeros(len(sources), dtype=bool)
        was[touched.index] = True
        new = np.zeros(len(sources), dtype=bool)
        new[touched.index[fits]] = True
        is_old = (held >= 0) & ~was
        kept = np.flatnonzero(new | is_old)
        spellings = touched.spellings
        still_out = np.flatnonzero((held < 0) & ~was)  # left out as too long, and still so
        if spellings and len(still_out):  # (the workers counted them)
            spellings = +(spellings - spelling_counts(sources[i] for i in still_out))
        (old_src, old_src_len), (old_tgt, old_tgt_len) = self._ids(held[kept[is_old[kept]]])
        src_new = [ids for ids, f in zip(touched.src, fits) if f]
        tgt_new = [ids for ids, f in zip(touched.tgt, fits) if f]
        order = np.where(is_old[kept], np.cumsum(is_old[kept]) - 1, len(old_src_len) + np.cumsum(new[kept]) - 1)
        src, src_len = _take(*_joined(old_src, old_src_len, src_new), order)
        tgt, tgt_len = _take(*_joined(old_tgt, old_tgt_len, tgt_new), order)
        (src_text, src_bytes), (tgt_text, tgt_bytes) = (
            lines_bytes([side[i] for i in kept]) for side in (sources, targets)
        )
        chunk = EncodedChunk(src, src_len, tgt, tgt_len, src_text, src_bytes, tgt_text, tgt_bytes)
        unknown = (int((src == self.pair.src.ids.unk).sum()), int((tgt == self.pair.tgt.ids.unk).sum()))
        return EncodedResult(chunk, len(sources) - len(kept), unknown, spellings)

    def _ids(self, index: np.ndarray) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
        """The old split's pairs `index` (ascending): (ids, [n] lengths), source and target."""
        shard_of = np.searchsorted(self.starts, index, side="right") - 1
        src: list[tuple[np.ndarray, np.ndarray]] = []
        tgt: list[tuple[np.ndarray, np.ndarray]] = []
        for k in np.unique(shard_of):
            local, shard = index[shard_of == k] - self.starts[k], self.old.shards[k]
            src.append(_take(np.asarray(shard.src), np.asarray(shard.src_offsets), local))
            tgt.append(_take(np.asarray(shard.tgt), np.asarray(shard.tgt_offsets), local))
        return _concatenated(src), _concatenated(tgt)


def _concatenated(pieces: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    if not pieces:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    return np.concatenate([p[0] for p in pieces]), np.concatenate([p[1] for p in pieces])


def _joined(ids: np.ndarray, lengths: np.ndarray, more: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    """Pairs' ids (one side) with `more` after them: (flat ids, [n + 1] offsets)."""
    extra = np.fromiter((len(x) for x in more), dtype=np.int64, count=len(more))
    flat = np.concatenate([ids.astype(np.int64), np.fromiter((i for x in more for i in x), np.int64, int(extra.sum()))])
    offsets = np.zeros(len(lengths) + len(extra) + 1, dtype=np.int64)
    np.cumsum(np.concatenate([lengths, extra]), out=offsets[1:])
    return flat, offsets


def _take(flat: np.ndarray, offsets: np.ndarray, index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sequences `index` of (`flat`, [n + 1] `offsets`), in that order: (their ids, [len(index)] lengths)."""
    begin = offsets[index].astype(np.int64)
    lengths = offsets[index + 1].astype(np.int64) - begin
    ends = np.cumsum(lengths)
    position = np.repeat(begin - (ends - lengths), lengths) + np.arange(int(ends[-1]) if len(ends) else 0)
    return np.asarray(flat[position], dtype=np.int64), lengths
