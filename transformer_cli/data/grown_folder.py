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
(`rewrite_folder`), with the same data.min_train_pairs check; train.log says how many pairs
were encoded again.

Finding the pairs costs a normalization of every line and a search of it (a fifth to a quarter
of encoding it), so when most pairs hold an added piece, encoding them all is cheaper. The
rule, decided before any work from a seeded sample of SAMPLE_PAIRS of the folder's pairs
(every split's, by their lines): when more than WHOLE_BUILD_SHARE of them hold an added piece,
the folder is built whole; train.log says which was chosen and why. (Measured with
benchmarks/grown_folder.py: see WHOLE_BUILD_SHARE.)
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import time
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
from ..tokenizers.truecase import Truecaser
from .corpus_append import corpus_record
from .encoding import SplitStats, check_enough, progress_bar
from .freshness import GivenTokenizers, encoded_with
from .grown_chunk import Job, encode_grown, setup
from .manifest import DataManifest, Dropped, VocabSizes, unknown_line
from .parallel import ChunkPool
from .parts import CHUNK_PAIRS, PartInput, part_chunks, parts_current, record_of, rewrite_folder
from .prepared import Prepared, verify_folder
from .shards import ShardWriter, id_dtype
from .sources import SPLITS, CorpusFile, iter_parallel, with_text

log = logging.getLogger("tfm")
# The share of pairs holding an added piece above which the folder is built whole: where the two
# cost the same (benchmarks/grown_folder.py, 2 busy cores; pair by pair / whole): on Multi30k's
# 29,000 pairs 0.83 at 30% of the pairs, 1.04 at 62%, 1.12 at 81% (there the fixed costs, the
# sample and the check of the growth, weigh most); on two joined pairs a line 0.83 at 51% (200,000
# and 1,000,000 pairs), 1.11 at 99% (200,000): even at about 80%.
WHOLE_BUILD_SHARE = 0.75
SAMPLE_PAIRS = 2_000  # the folder's pairs the share is estimated from


def regrowable(
    cfg: Config, old: DataManifest, fingerprint: str, given: GivenTokenizers, parts: tuple[PartInput, ...]
) -> tuple[list[str], list[str]] | None:
    """The pieces `given` adds to the folder's tokenizers (source side, target side) when the
    folder is encoded again pair by pair for them (see the module docstring); else None."""
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
    if not (isinstance(sides[0], Reach) and isinstance(sides[1], Reach)):
        return None
    added = list(sides[0].added), list(sides[1].added)
    share, sample = _share(Prepared(folder, old), (sides[0], sides[1]))
    held = f"vocabulary grew by {_grew(added)} pieces, held by about {share:.0%} of the pairs (a sample of {sample:,})"
    if share > WHOLE_BUILD_SHARE:
        why = "finding them costs more than it saves"
        log.info("%s: more than %.0f%%, so the folder is built whole (%s)", held, 100 * WHOLE_BUILD_SHARE, why)
        return None
    log.info("%s: only the pairs that hold one are encoded again", held)
    return added


def _share(before: Prepared, reaches: tuple[Reach, Reach]) -> tuple[float, int]:
    """The share of a seeded sample of the folder's pairs (every split's) with a side that holds
    an added piece, and the sample's size."""
    sizes = {name: sum(shards) for name, shards in before.manifest.shards.items()}
    starts = np.cumsum([0, *sizes.values()])
    picked = np.sort(np.random.default_rng(0).choice(int(starts[-1]), min(SAMPLE_PAIRS, int(starts[-1])), False))
    lines = []
    for k, name in enumerate(sizes):
        split = before.split(name)
        lines += [split.lines(int(i)) for i in picked[(picked >= starts[k]) & (picked < starts[k + 1])] - starts[k]]
    if not lines:
        return 0.0, 0
    held = reaches[0].touched([s for s, _ in lines]) | reaches[1].touched([t for _, t in lines])
    return float(held.mean()), len(lines)


def _grew(added: tuple[list[str], list[str]]) -> int:
    return len(added[0]) if added[0] == added[1] else len(added[0]) + len(added[1])


@dataclass
class _Count:
    touched: int = 0
    pairs: int = 0

    def __str__(self) -> str:
        return f"{self.touched:,} of {self.pairs:,}"


def _encode_all(
    cfg: Config,
    work: Path,
    chunks: dict[str, Iterator[Chunk]],
    grown: tuple[TokenizerPair, tuple[list[str], list[str]], Prepared, Any],
    how: dict[str, tuple[int | None, bool]],
    check_stop: Callable[[], None] | None,
) -> tuple[dict[str, SplitStats], dict[str, _Count]]:
    """Each split's and part's chunks through one pool of workers into `work`'s shards (`grown`:
    the grown tokenizers, their added pieces, the folder as it was, the id dtype); each one's
    statistics and how many of its pairs were encoded again."""
    pair, added, before, dtype = grown
    old = before.manifest
    dropped = {"train": old.dropped.too_long_train_pairs, **{n: r.too_long for n, r in old.parts.items()}}
    stats: dict[str, SplitStats] = {}
    counts: dict[str, _Count] = {}
    with (
        progress_bar(f"encoding the pairs that hold the {pair.src.kind} growth's pieces") as bar,
        ChunkPool(available_cpus(), setup, (pair.state(), added, before, dtype)) as pool,
    ):
        for name, split in chunks.items():
            held = _Held(before if dropped.get(name, 0) else None, name)
            jobs = (Job(chunk, name, held(*chunk), *how[name]) for chunk in split)
            writer = ShardWriter(work, name, old.langs, dtype, cfg.data.shard_tokens)
            counts[name] = _Count()
            stats[name] = _encode(writer, jobs, pool, check_stop, bar, counts[name])
    return stats, counts


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
    encoded again, the others' ids copied (one pool of worker processes: data/grown_chunk.py)."""
    started, folder, langs = time.monotonic(), cfg.data_dir, old.langs
    pair = TokenizerPair(given.pair.src, given.pair.tgt, given.pair.joint)
    dtype = id_dtype(max(pair.src.vocab_size, pair.tgt.vocab_size))
    before = Prepared(folder, old)
    where = {(f.split, f.lang): f.path for f in files}
    path = {s: (where[s, langs[0]], where[s, langs[1]]) for s in SPLITS}
    max_len = cfg.data.train_max_len
    how = {"train": (max_len, not pair.src.lowercase), "val": (None, False), "test": (None, False)}
    how |= {p.name: (max_len, False) for p in parts}  # (pairs too long; spellings counted)

    def build(work: Path) -> DataManifest:
        empty = {name: [0] for name in [*SPLITS, *old.parts]}
        chunks: dict[str, Iterator[Chunk]] = {
            "train": with_text(iter_parallel(*path["train"], CHUNK_PAIRS), empty["train"], cfg.data.limit_train),
            "val": iter_parallel(*path["val"], CHUNK_PAIRS),
            "test": iter_parallel(*path["test"], CHUNK_PAIRS),
            **{p.name: part_chunks(p.paths, (0, 0), empty[p.name]) for p in parts},
        }
        stats, counts = _encode_all(cfg, work, chunks, (pair, added, before, dtype), how, check_stop)
        check_enough(cfg, stats["train"], empty["train"][0], sum(stats[p.name].pairs for p in parts))
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


def _encode(
    writer: ShardWriter,
    jobs: Iterator[Job],
    pool: ChunkPool,
    check_stop: Callable[[], None] | None,
    bar: Any,
    count: _Count,
) -> SplitStats:
    """A split's chunks through the workers, their kept pairs appended in order to `writer`."""
    stats = SplitStats()
    for result, touched in pool.map(encode_grown, jobs, check_stop):
        writer.add(result.chunk)
        stats.add(result)
        pairs = len(result.chunk) + result.too_long
        bar.update(pairs)
        count.touched, count.pairs = count.touched + touched, count.pairs + pairs
    stats.shards = writer.close()
    return stats


def _line(added: tuple[list[str], list[str]], counts: dict[str, _Count]) -> str:
    """train.log's line: what grew, and how many pairs were encoded again, split by split."""
    total = _Count(sum(c.touched for c in counts.values()), sum(c.pairs for c in counts.values()))
    each = ", ".join(f"{name} {count}" for name, count in counts.items())
    grew = f"vocabulary grew by {_grew(added)} pieces: {total} pairs hold them"
    return f"{grew}, re-encoded ({each}); the others keep their ids"


class _Held:
    """Which of a split's pairs in the folder each input pair is, chunk by chunk: the folder's
    pairs in order when it left none out (`before` None), else found by their text in the
    folder's lines, read ahead a chunk at a time (equal pairs encode alike, so share their fate:
    the first input pair equal to the folder's next is that pair)."""

    def __init__(self, before: Prepared | None, split: str):
        self.at = 0  # the folder's next pair
        self.blocks = _lines(before, split) if before is not None else None
        self.src: list[str] = []  # the folder's lines from `at` on, read ahead
        self.tgt: list[str] = []

    def __call__(self, sources: list[str], targets: list[str]) -> np.ndarray:
        """[n] int64: the folder's pair each input pair is (-1: one it left out)."""
        if self.blocks is None:
            self.at += len(sources)
            return np.arange(self.at - len(sources), self.at)
        while len(self.src) < len(sources) and (block := next(self.blocks, None)) is not None:
            self.src += block[0]
            self.tgt += block[1]
        out = np.full(len(sources), -1, dtype=np.int64)
        src, tgt, j = self.src, self.tgt, 0
        for i, (s, t) in enumerate(zip(sources, targets)):
            if j < len(src) and s == src[j] and t == tgt[j]:
                out[i], j = self.at + j, j + 1
        del src[:j], tgt[:j]
        self.at += j
        return out


def _lines(before: Prepared, split: str) -> Iterator[tuple[list[str], list[str]]]:
    """The folder's lines of `split`, in blocks (as written: split at line feeds alone)."""
    paths = [before.folder / f"{split}.{lang}.txt" for lang in before.langs]
    with open(paths[0], encoding="utf-8", newline="\n") as src, open(paths[1], encoding="utf-8", newline="\n") as tgt:
        while block := [line[:-1] for line in itertools.islice(src, CHUNK_PAIRS)]:
            yield block, [line[:-1] for line in itertools.islice(tgt, CHUNK_PAIRS)]
