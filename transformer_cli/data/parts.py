"""Sources of training pairs beside a config's corpus (the pairs synthetic/ makes by translating
text), each encoded into its own split of the preprocessed folder, once: `PartInput` names
one (two aligned files, one pair a line), `encode_part` encodes it, `encode_parts` all of a
config's; `parts_current` says whether a folder holds them as they are, and `update_parts`
brings a folder whose corpus and tokenizers are current up to date with them.

A part is never re-encoded because something else changed (another part, the corpus's mix,
a tag: data/mixed.py mixes the splits when batches are drawn). When its files grew at the end
since they were encoded (a night's new lines), the folder's split keeps its shards and only
the new pairs are encoded into new ones; when they changed otherwise, the part is encoded
again whole. The manifest's `PartRecord` says what was encoded (`inputs`: the files' first
bytes, by size and sha256).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import itertools
import logging
import os
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from ..config import Config
from ..contracts.tokenizer import Chunk
from ..errors import TfmError, UsageError
from ..fsutil import (
    WriteError,
    atomic_write,
    atomic_write_folder,
    exclusive_lock,
    file_record,
    file_sha256,
    recorded_sha256,
)
from ..host.machine import available_cpus
from ..tokenizers.pair import TokenizerPair
from .encoding import EncodeSettings, SplitStats, encode_split, progress_bar, setup
from .manifest import DataManifest, FileRecord, PartRecord
from .parallel import ChunkPool
from .shards import ShardWriter, shard_names
from .sources import with_text

CHUNK_PAIRS = 5_000
log = logging.getLogger("tfm")


@dataclass(frozen=True)
class PartInput:
    """A source of pairs beside the corpus: its split's name and its two files (source and
    target language), one pair a line."""

    name: str
    paths: tuple[Path, Path]

    def records(self, langs: tuple[str, str], known: PartRecord | None = None) -> dict[str, FileRecord]:
        """Size and sha256 of each file as it is now, by language (a sum in `known` is taken
        while the file keeps the size and modification time recorded with it)."""
        out = {}
        for lang, path in zip(langs, self.paths):
            digest = recorded_sha256(path, known.inputs.get(lang) if known else None)
            out[lang] = file_record(path, digest or prefix_sha256(path, path.stat().st_size))
        return out


def write_part(folder: Path, name: str, langs: tuple[str, str], sides: tuple[list[str], list[str]]) -> PartInput:
    """A part of these pairs (`sides`: its source and target lines) in `folder` (as
    `<name>.<lang>`), under the folder's lock; a file already holding them is left as it is, so
    its recorded sum stands and nothing is encoded again."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = (folder / f"{name}.{langs[0]}", folder / f"{name}.{langs[1]}")
    with exclusive_lock(folder / ".lock"):
        for path, side in zip(paths, sides):
            text = "".join(f"{line}\n" for line in side).encode("utf-8")
            if not path.is_file() or path.read_bytes() != text:
                atomic_write(path, functools.partial(_write_bytes, text))
    return PartInput(name, paths)


def _write_bytes(text: bytes, f: BinaryIO) -> None:
    f.write(text)


def prefix_sha256(path: Path, size: int) -> str:
    """sha256 of the first `size` bytes of `path`."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        left = size
        while left > 0:
            block = f.read(min(1 << 20, left))
            if not block:
                break
            h.update(block)
            left -= len(block)
    return h.hexdigest()


def grown_from(old: PartRecord, now: dict[str, FileRecord], paths: tuple[Path, Path], langs: tuple[str, str]) -> bool:
    """Whether each file now starts with the bytes `old` encoded (and so only grew at its end)."""
    for lang, path in zip(langs, paths):
        before = old.inputs.get(lang)
        if not before or before["size"] > now[lang]["size"] or prefix_sha256(path, before["size"]) != before["sha256"]:
            return False
    return True


def _left_out(empty: int, too_long: int) -> str:
    """What encoding just left out, for its log line ("" when nothing)."""
    said = [f"{n} {what}" for n, what in ((empty, "empty"), (too_long, "longer than data.train_max_len")) if n]
    return f" ({', '.join(said)}: left out)" if said else ""


def part_chunks(paths: tuple[Path, Path], offsets: tuple[int, int], dropped: list[int]) -> Iterator[Chunk]:
    """The pairs of the two files from byte `offsets` on, in chunks; pairs with an empty side
    are left out and counted in `dropped[0]`. Files of different lengths are a UsageError."""
    yield from with_text(_decoded(paths, offsets), dropped)


def _decoded(paths: tuple[Path, Path], offsets: tuple[int, int]) -> Iterator[tuple[list[str], list[str]]]:
    """The lines of the two files from byte `offsets` on, decoded, in chunks."""
    with open(paths[0], "rb") as a, open(paths[1], "rb") as b:
        a.seek(offsets[0])
        b.seek(offsets[1])
        while True:
            sources, targets = list(itertools.islice(a, CHUNK_PAIRS)), list(itertools.islice(b, CHUNK_PAIRS))
            if len(sources) != len(targets):
                raise UsageError(f"misaligned pairs: {paths[0]} and {paths[1]} have different numbers of lines")
            if not sources:
                return
            yield [s.decode("utf-8").rstrip("\n") for s in sources], [t.decode("utf-8").rstrip("\n") for t in targets]


def stats_of(record: PartRecord) -> SplitStats:
    """The sums a split's record keeps, to add a chunk's to."""
    return SplitStats(record.pairs, list(record.tokens), list(record.longest), list(record.unknown), record.too_long)


def record_of(inputs: dict[str, FileRecord], stats: SplitStats, empty: int) -> PartRecord:
    """A split's record: its input files and its sums."""
    return PartRecord(
        inputs, stats.pairs, list(stats.lengths), list(stats.longest), list(stats.unknown), empty, stats.too_long
    )


@dataclass
class PartEncoding:
    """What encoding a part made: its record, its shards and its summary's sums."""

    record: PartRecord
    shards: list[int]
    stats: SplitStats


def encode_part(
    folder: Path,
    part: PartInput,
    langs: tuple[str, str],
    dtype: str,
    shard_tokens: int,
    pool: ChunkPool,
    earlier: tuple[Path, DataManifest] | None,
    check_stop: Callable[[], None] | None,
    bar: Any,
) -> PartEncoding:
    """`part` encoded into `folder` as split `part.name`, with `pool`'s tokenizers. `earlier`:
    the folder (and manifest) the same tokenizers encoded before: a part it holds that the
    files only grew past keeps its shards (linked) and gets the new pairs appended."""
    old = earlier[1].parts.get(part.name) if earlier else None
    now = part.records(langs, old)
    grown = earlier is not None and old is not None and grown_from(old, now, part.paths, langs)
    if grown and earlier is not None and old is not None:  # (the last two: for the type checker)
        stats = stats_of(old)
        shards = earlier[1].shards[part.name]
        carry(earlier[0], folder, part.name, langs, len(shards))
        offsets = (old.inputs[langs[0]]["size"], old.inputs[langs[1]]["size"])
        empty = [old.empty]
    else:
        if old is not None:
            log.info("%s: its pairs changed before their end: encoding it whole", part.name)
        stats, shards, offsets, empty = SplitStats(), [], (0, 0), [0]
    before, empty_before, too_long_before = stats.pairs, empty[0], stats.too_long
    writer = ShardWriter(folder, part.name, langs, dtype, shard_tokens, shards)
    stats = encode_split(writer, part_chunks(part.paths, offsets, empty), pool, check_stop, bar, stats)
    left_out = _left_out(empty[0] - empty_before, stats.too_long - too_long_before)
    if grown:
        log.info("%s: %d new pairs encoded%s, %d kept as they were", part.name, stats.pairs - before, left_out, before)
    else:
        log.info("%s: %d pairs encoded%s", part.name, stats.pairs, left_out)
    record = record_of(now, stats, empty[0])
    return PartEncoding(record, stats.shards, stats)


def carry(source: Path, folder: Path, split: str, langs: tuple[str, str], shards: int) -> None:
    """A split's files from `source` into `folder`: its shards linked (they are never written
    again), its text files copied (they are appended to)."""
    for k in range(shards):
        for name in shard_names(split, k):
            link_or_copy(source / name, folder / name)
    for lang in langs:
        shutil.copyfile(source / f"{split}.{lang}.txt", folder / f"{split}.{lang}.txt")


def link_or_copy(source: Path, target: Path) -> None:
    """`target` as a hard link to `source` (a copy where the file system has none)."""
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)


def encode_parts(
    cfg: Config,
    folder: Path,
    parts: tuple[PartInput, ...],
    pair: TokenizerPair,
    dtype: str,
    earlier: DataManifest | None,
    check_stop: Callable[[], None] | None,
    bar: Any,
) -> dict[str, PartEncoding]:
    """Each part encoded into `folder` (see data/parts.py; `earlier`: the manifest of
    `cfg.data_dir` as it is, whose parts may be appended to)."""
    if not parts:
        return {}
    langs = (cfg.data.src_lang, cfg.data.tgt_lang)
    settings = EncodeSettings(dtype, cfg.data.train_max_len)
    before = (cfg.data_dir, earlier) if earlier is not None else None
    with ChunkPool(available_cpus(), setup, (pair.state(), settings)) as pool:
        return {
            part.name: encode_part(folder, part, langs, dtype, cfg.data.shard_tokens, pool, before, check_stop, bar)
            for part in parts
        }


def parts_current(old: DataManifest, parts: tuple[PartInput, ...]) -> bool:
    """Whether the folder holds exactly `parts`, encoded from their files as they are."""
    if set(old.parts) != {p.name for p in parts}:
        return False
    for part in parts:
        record = old.parts[part.name]
        now = part.records(old.langs, record)
        if any(now[lang]["sha256"] != record.inputs[lang]["sha256"] for lang in old.langs):
            return False
    return True


def update_parts(
    cfg: Config, old: DataManifest, parts: tuple[PartInput, ...], check_stop: Callable[[], None] | None
) -> DataManifest:
    """The folder with its corpus's splits and tokenizers as they are and its parts brought up to
    date (a part's files that only grew: the new pairs alone encoded), replaced as a whole."""
    started = time.monotonic()
    folder = cfg.data_dir
    pair = TokenizerPair.load(folder)
    outputs = old.outputs or {}
    own = {n for n in outputs if n.split(".", 1)[0] in old.parts}  # the parts' files

    def build(work: Path) -> DataManifest:
        for name in outputs:
            if name not in own and name != "manifest.json":
                link_or_copy(folder / name, work / name)
        with progress_bar("encoding the parts") as bar:
            encoded = encode_parts(cfg, work, parts, pair, old.id_dtype, old, check_stop, bar)
        kept = {n: r for n, r in outputs.items() if n not in own}
        written = {p.name for p in work.iterdir() if p.is_file()} - set(kept)
        new = {n: file_record(work / n, file_sha256(work / n)) for n in sorted(written)}
        corpus = [s for s in old.splits if s not in old.parts]
        return dataclasses.replace(
            old,
            shards={**{s: old.shards[s] for s in corpus}, **{n: e.shards for n, e in encoded.items()}},
            splits={**{s: old.splits[s] for s in corpus}, **{n: e.stats.summary() for n, e in encoded.items()}},
            parts={n: e.record for n, e in encoded.items()},
            outputs={**kept, **new},
            elapsed_s=round(time.monotonic() - started, 2),
        )

    return rewrite_folder(folder, build)


def rewrite_folder(folder: Path, build: Callable[[Path], DataManifest]) -> DataManifest:
    """`folder` replaced as a whole by what `build` makes in a work folder, the manifest it
    returns written last (fsutil.atomic_write_folder); a full disk is the data's TfmError."""
    built: list[DataManifest] = []

    def write(work: Path) -> None:
        manifest = build(work)
        manifest.write(work)
        built.append(manifest)

    try:
        atomic_write_folder(folder, write)
    except WriteError as e:
        raise TfmError(f"cannot write preprocessed data to {folder}: {e.reason}") from None
    return built[0]
