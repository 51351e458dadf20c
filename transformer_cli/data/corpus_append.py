"""A corpus that only grew at the end of its training files, encoded by what it added.

A continued night (the parent's tokenizers given: nothing is fitted) whose files corpus gained
lines appends their pairs to the training split's shards, as a part's new lines are (data/
parts.py), instead of encoding the whole corpus again. It applies when the folder records its
training split (`DataManifest.corpus`: its sums and its files' first bytes), the settings, the
evaluation files and the tokenizers are the same, data.limit_train is unset, and each training
file is plain text that starts with the bytes the folder encoded. Otherwise the folder is
built whole, as before. The source truecaser stays the one learned when the folder was built
(it recases lowercased input; `tfm preprocess --force` learns it again from every pair).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from pathlib import Path

from ..config import Config
from ..fsutil import file_record, file_sha256
from ..host.machine import available_cpus
from ..tokenizers.pair import TokenizerPair
from .encoding import EncodeSettings, SplitStats, encode_split, progress_bar, setup
from .freshness import GivenTokenizers, encoded_with, settings_fingerprint, tokenizers_differ
from .manifest import DataManifest, Dropped, PartRecord, unknown_line
from .parallel import ChunkPool
from .parts import CHUNK_PAIRS, carry, link_or_copy, prefix_sha256, record_of, rewrite_folder, stats_of
from .prepared import verify_folder
from .shards import ShardWriter
from .sources import CorpusFile, Start, iter_parallel, with_text

CONFIG = "config.yaml"  # the config the folder is encoded with
log = logging.getLogger("tfm")


def corpus_record(stats: SplitStats, empty: int, train: list[CorpusFile], langs: tuple[str, str]) -> PartRecord:
    """The training split as the manifest records it: its sums and its files, whole."""
    files = {f.lang: f for f in train}
    return record_of({lang: file_record(files[lang].path, files[lang].sha256) for lang in langs}, stats, empty)


def appended(
    cfg: Config,
    old: DataManifest,
    files: list[CorpusFile],
    given: GivenTokenizers,
    reserved: tuple[str, ...],
) -> tuple[Start, Start] | None:
    """Where each training file's new lines begin (byte offset, line number) when the corpus
    only grew at their end since `old` was built (see the module docstring); else None."""
    record = old.corpus
    if record is None or cfg.data.limit_train is not None:
        return None
    if old.settings_fingerprint != settings_fingerprint(cfg) or tokenizers_differ(cfg.data_dir, old, given, reserved):
        return None
    if any(old.files.get(f.path.name) != f.sha256 for f in files if f.split != "train"):
        return None
    if verify_folder(cfg.data_dir, old) is not None:  # damaged: built whole (and said so)
        return None
    lines = record.pairs + record.empty + record.too_long
    train = {f.lang: f for f in files if f.split == "train"}
    starts = []
    for lang in old.langs:
        before, now = record.inputs.get(lang), train[lang].path
        if before is None or now.name.endswith(".gz") or now.stat().st_size <= before["size"]:
            return None
        if prefix_sha256(now, before["size"]) != before["sha256"]:
            return None
        starts.append((int(before["size"]), lines + 1))
    return starts[0], starts[1]


def append_corpus(
    cfg: Config,
    old: DataManifest,
    files: list[CorpusFile],
    fingerprint: str,
    starts: tuple[Start, Start],
    given: GivenTokenizers,
    check_stop: Callable[[], None] | None,
) -> DataManifest:
    """The folder with the training files' new pairs appended to its training split (its
    shards linked, not written again), recorded as encoded with `given` (the parent model the
    night continues), and everything else as it is, replaced as a whole."""
    started, folder, langs = time.monotonic(), cfg.data_dir, old.langs
    record = old.corpus
    assert record is not None  # (`appended` said so)
    train = [f for f in files if f.split == "train"]
    paths = tuple(next(f.path for f in train if f.lang == lang) for lang in langs)
    outputs = old.outputs or {}
    own = {name for name in outputs if name.startswith("train.")} | {CONFIG}

    def build(work: Path) -> DataManifest:
        for name in outputs:
            if name not in own:
                link_or_copy(folder / name, work / name)
        carry(folder, work, "train", langs, len(old.shards["train"]))
        (work / CONFIG).write_text(encoded_with(cfg, given).to_yaml(), encoding="utf-8")
        stats = stats_of(record)
        empty = [record.empty]
        writer = ShardWriter(work, "train", langs, old.id_dtype, cfg.data.shard_tokens, old.shards["train"])
        settings = EncodeSettings(old.id_dtype, cfg.data.train_max_len)
        chunks = with_text(iter_parallel(paths[0], paths[1], CHUNK_PAIRS, starts), empty)
        with ChunkPool(available_cpus(), setup, (TokenizerPair.load(folder).state(), settings)) as pool:
            with progress_bar("encoding the corpus's new pairs") as bar:
                stats = encode_split(writer, chunks, pool, check_stop, bar, stats)
        log.info(
            "corpus: %d new pairs encoded (its training files grew at their end), %d kept as they were",
            stats.pairs - record.pairs,
            record.pairs,
        )
        log.info("%s", unknown_line(stats.oov_rate(), langs))
        kept = {name: r for name, r in outputs.items() if name not in own}
        written = {p.name for p in work.iterdir() if p.is_file()} - set(kept)
        return dataclasses.replace(
            old,
            fingerprint=fingerprint,
            tokenizer=given.pair.src.kind,
            tokenizer_from=given.parent,
            files={f.path.name: f.sha256 for f in files},
            source_files={str(f.path.resolve()): file_record(f.path, f.sha256) for f in files},
            shards={**old.shards, "train": stats.shards},
            splits={**old.splits, "train": stats.summary()},
            dropped=Dropped(empty[0], stats.too_long),
            corpus=corpus_record(stats, empty[0], train, langs),
            outputs={**kept, **{n: file_record(work / n, file_sha256(work / n)) for n in sorted(written)}},
            elapsed_s=round(time.monotonic() - started, 2),
        )

    return rewrite_folder(folder, build)
