"""`tfm preprocess`: fetch and verify a corpus, fit tokenizers, encode every split.

Output folder (`<data.dir>/<name>/`), written as a whole into a temporary folder and then
renamed into place, so an interrupted run never leaves a half-written one:

    manifest.json        inputs (checksums), fingerprint, counts, shards, vocab sizes, versions
    config.yaml          the fully resolved config
    tokenizer.json       tokenizer kind, options, vocabularies, source truecaser (+ spm.*.model)
    {train,val,test}.NNNNN.{src,tgt,idx}.bin   ids in memory-mappable shards (data/shards.py)
    {train,val,test}.{lang}.txt  raw text, one line per pair: the kept training pairs (which
                         per-batch augmentation reads) and the references for BLEU

Nothing grows with the corpus: the training split is read twice as a stream of chunks (once
to fit the tokenizers, on a bounded sample for SentencePiece; once to encode) and encoded in
worker processes (data/parallel.py, data/encoding.py) that the main process writes out in order.
A run that continues a trained model gives its tokenizers (`GivenTokenizers`): nothing is
fitted, the corpus is encoded with the parent's vocabularies, and the manifest records the
parent (`tokenizer_from`) and the vocabularies' digest (`tokenizer_sha256`).

A folder whose fingerprint (config sections that shape the data + input checksums + format
version) and tokenizers match, and whose files still match the sizes and SHA-256 sums its
manifest lists, is reused as is (data/freshness.py); a damaged one is rebuilt. The manifest
records the source it was built from, so a later command with no source given reuses it (an
offline re-run), and when the source cannot be reached at all, a folder built with the same
settings is used with a warning.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..config import Config
from ..contracts.tokenizer import Chunk
from ..errors import TfmError, UsageError
from ..fsutil import file_record, remove_stale_work_folders
from ..host.allocator import release_freed_memory
from ..host.machine import available_cpus
from ..provenance import package_versions
from ..seams import TOKENIZERS
from ..tokenizers.base import sample_pairs
from ..tokenizers.pair import TokenizerPair
from ..tokenizers.truecase import Truecaser
from .corpus_append import append_corpus, appended, corpus_record
from .encoding import EncodeSettings, SplitStats, check_enough, encode_split, progress_bar, setup
from .folder_lock import hold_shared, rebuilding, release
from .freshness import (
    LEGACY_MARKS,
    GivenTokenizers,
    data_fingerprints,
    encoded_with,
    settings_fingerprint,
    still_current,
    tokenizers_differ,
)
from .grown_folder import regrow_folder, regrowable
from .manifest import (
    DataManifest,
    Dropped,
    Origin,
    VocabSizes,
    unknown_line,
)
from .parallel import ChunkPool
from .parts import PartInput, encode_parts, parts_current, rewrite_folder, update_parts
from .prepared import Prepared, verify_folder
from .shards import ShardWriter, id_dtype
from .sources import (
    SPLITS,
    CorpusFile,
    current_sha256,
    explicit_source,
    fetch_corpus,
    iter_parallel,
    read_parallel,
    resolve_source,
    with_text,
)

EVAL_SPLITS = ("val", "test")
CHUNK_PAIRS = 5_000  # pairs a worker encodes at a time
log = logging.getLogger("tfm")


class TrainingPairs:
    """The training files as a stream of chunks: pairs with an empty side are dropped (and
    counted), at most `limit` pairs are kept. Each call of `chunks` reads the files again.
    It is the `TrainingText` tokenizers are fitted on (`sample`, `map` in `workers` processes),
    stopping between chunks when `check_stop` says so; `reserved` marks join the vocabularies."""

    def __init__(
        self,
        src: Path,
        tgt: Path,
        limit: int | None,
        workers: int = 1,
        check_stop: Callable[[], None] | None = None,
        reserved: tuple[str, ...] = (),
    ):
        self.paths, self.limit = (src, tgt), limit
        self.workers, self.check_stop, self.reserved = workers, check_stop, reserved
        self._empty = [0]

    def sample(self, size: int) -> Chunk:
        return sample_pairs(self.chunks(), size, self.check_stop)

    def map(self, fn: Callable[[Chunk], Any], setup: Callable[..., None], args: tuple[Any, ...]) -> Iterator[Any]:
        with ChunkPool(self.workers, setup, args) as pool:
            yield from pool.map(fn, self.chunks(), self.check_stop)

    @property
    def empty(self) -> int:
        """Pairs with an empty side left out so far by the last `chunks`."""
        return self._empty[0]

    def chunks(self) -> Iterator[Chunk]:
        self._empty = [0]
        yield from with_text(iter_parallel(*self.paths, CHUNK_PAIRS), self._empty, self.limit)


def _fit_tokenizers(cfg: Config, train: TrainingPairs) -> TokenizerPair:
    """tokenizer.kind's tokenizers fitted on the training split (each kind knows how:
    `Tokenizer.fit`; SentencePiece on a sample, word vocabularies on counts in the workers)."""
    src, tgt = TOKENIZERS[cfg.tokenizer.kind].fit(cfg.tokenizer, (cfg.data.src_lang, cfg.data.tgt_lang), train)
    return TokenizerPair(src, tgt, joint=src is tgt)


def _chunked(lines: tuple[list[str], list[str]]) -> Iterator[Chunk]:
    for start in range(0, len(lines[0]), CHUNK_PAIRS):
        yield lines[0][start : start + CHUNK_PAIRS], lines[1][start : start + CHUNK_PAIRS]


def _choose_source(cfg: Config, old: DataManifest | None) -> str:
    """The configured source (option, config, environment); else the one the last preprocess
    used, when it was a local folder that still exists; else the corpus's public URL."""
    given = explicit_source(cfg.data)
    if given is not None:
        return given
    recorded = old.source if old is not None else None
    if recorded is not None and Path(recorded).is_dir():
        log.info("using the source recorded by the last preprocess: %s", recorded)
        return recorded
    return resolve_source(cfg.data)


def prepare(
    cfg: Config,
    force: bool = False,
    check_stop: Callable[[], None] | None = None,
    verify: bool = False,
    hold: bool = False,
    given: GivenTokenizers | None = None,
    parts: Sequence[PartInput] = (),
    reserved: tuple[str, ...] = (),
) -> tuple[Prepared, bool]:
    """Make `cfg`'s preprocessed folder current. Returns it and whether it was (re)built.
    `parts`: sources of pairs beside the corpus (data/parts.py), each encoded into a split of
    its own with the corpus's tokenizers; a folder whose corpus and tokenizers are current has
    only the parts that changed encoded (what they appended, when they grew at the end).
    `reserved`: marks the fitted tokenizers hold as tokens of their own (tokenizers/
    text_marks.py: those the training mix's transforms write, training/mix_plan.py).

    Corpus and prepared files that kept the size and modification time recorded when they were
    last hashed are not read again (a start does not re-hash gigabytes); `verify` reads them all.
    `check_stop` is called between units of work (it may raise to abort; nothing is left behind).
    With `given`, the corpus is encoded with those tokenizers (a folder holding others is
    rebuilt); without, the folder's own fitted tokenizers are kept or fitted.
    The folder is held for reading while this runs (data/folder_lock.py), and afterwards when
    `hold`, until the caller's `folder_lock.release(cfg.data_dir)`.
    """
    hold_shared(cfg.data_dir, check_stop)
    try:
        prepared = _prepare(cfg, force, check_stop, verify, given, tuple(parts), reserved)
    except BaseException:
        release(cfg.data_dir)
        raise
    if not hold:
        release(cfg.data_dir)
    return prepared


def _prepare(
    cfg: Config,
    force: bool,
    check_stop: Callable[[], None] | None,
    verify: bool,
    given: GivenTokenizers | None,
    parts: tuple[PartInput, ...],
    reserved: tuple[str, ...],
) -> tuple[Prepared, bool]:
    started = time.monotonic()
    folder = cfg.data_dir
    removed = remove_stale_work_folders(folder)
    if removed:
        log.info("removed %d work folder(s) left by an interrupted preprocess beside %s", removed, folder)
    old = DataManifest.read(folder)
    source = _choose_source(cfg, old)
    log.info("source: %s", source)
    try:
        files = fetch_corpus(cfg.data, source, None if verify or old is None else old.source_files)
    except UsageError:
        raise
    except TfmError as e:  # unreachable source: fall back on data built with the same settings
        return _stand_in(cfg, old, e, force, given, parts, reserved), False
    fingerprints = data_fingerprints(cfg, files)
    fingerprint = fingerprints[0]
    changed = old is not None and not force and old.fingerprint not in fingerprints
    starts = appended(cfg, old, files, given, reserved) if changed and old and given else None
    if old is not None and given is not None and starts is not None:  # grew at the end: its new pairs alone
        with rebuilding(folder, check_stop):
            manifest = append_corpus(cfg, old, files, fingerprint, starts, given, check_stop)
            if not parts_current(manifest, parts):
                manifest = update_parts(cfg, manifest, parts, check_stop)
        return Prepared(folder, manifest), True
    added = regrowable(cfg, old, fingerprint, given, parts) if old and given and not force else None
    if old is not None and given is not None and added is not None:  # a growth: the pairs it can change
        with rebuilding(folder, check_stop):
            manifest = regrow_folder(cfg, old, files, given, added, parts, check_stop)
        return Prepared(folder, manifest), True
    if old is not None and not force and still_current(folder, old, fingerprints, verify, given, reserved):
        if parts_current(old, parts):
            return Prepared(folder, old), False
        with rebuilding(folder, check_stop):
            manifest = update_parts(cfg, old, parts, check_stop)
        return Prepared(folder, manifest), True
    origin = Origin(
        fingerprint=fingerprint,
        settings_fingerprint=settings_fingerprint(cfg),
        created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        source=source,
        files={f.path.name: f.sha256 for f in files},
        source_files={str(f.path.resolve()): file_record(f.path, f.sha256) for f in files},
        src_lang=cfg.data.src_lang,
        tgt_lang=cfg.data.tgt_lang,
        tokenizer=given.pair.src.kind if given else cfg.tokenizer.kind,
        tokenizer_from=given.parent if given else None,
    )
    with rebuilding(folder, check_stop):
        pair, manifest = _build(cfg, files, origin, started, check_stop, given, parts, reserved)
    return Prepared(folder, manifest, pair), True


def _stand_in(
    cfg: Config,
    old: DataManifest | None,
    error: TfmError,
    force: bool,
    given: GivenTokenizers | None,
    parts: tuple[PartInput, ...],
    reserved: tuple[str, ...],
) -> Prepared:
    """The existing folder in place of a source that cannot be reached, when it was built with
    the same settings, tokenizers and parts and is intact; else the error."""
    folder = cfg.data_dir
    settings = (settings_fingerprint(cfg), settings_fingerprint(cfg, LEGACY_MARKS))
    same = old is not None and old.settings_fingerprint in settings
    if (
        old is None
        or not same
        or force
        or tokenizers_differ(folder, old, given, reserved)
        or not parts_current(old, parts)
    ):
        raise error
    problem = verify_folder(folder, old)
    if problem is not None:
        raise TfmError(f"{error}; the preprocessed data in {folder} cannot stand in: {problem}") from None
    log.warning(
        "warning: %s; using the preprocessed data in %s (built %s from %s)", error, folder, old.created, old.source
    )
    return Prepared(folder, old)


def _build(
    cfg: Config,
    files: list[CorpusFile],
    origin: Origin,
    started: float,
    check_stop: Callable[[], None] | None,
    given: GivenTokenizers | None,
    parts: tuple[PartInput, ...],
    reserved: tuple[str, ...],
) -> tuple[TokenizerPair, DataManifest]:
    """Fit the tokenizers on the corpus's training pairs (unless `given`), then encode every
    split and part into a work folder that replaces `cfg.data_dir` as a whole
    (`atomic_write_folder`); returns them and the folder's manifest. Memory holds a sample
    (SentencePiece), the evaluation splits and a few chunks per worker."""
    langs = (cfg.data.src_lang, cfg.data.tgt_lang)
    where = {(f.split, f.lang): f.path for f in files}
    paths = {s: (where[s, langs[0]], where[s, langs[1]]) for s in SPLITS}
    evaluation = {s: read_parallel(*paths[s]) for s in EVAL_SPLITS}  # small: read first, fail early
    workers = available_cpus()
    train = TrainingPairs(*paths["train"], cfg.data.limit_train, workers, check_stop, reserved)
    if given is None:
        pair = _fit_tokenizers(cfg, train)
    else:  # the parent's vocabularies; the truecaser is learned from this corpus below
        pair = TokenizerPair(given.pair.src, given.pair.tgt, given.pair.joint)
    release_freed_memory()  # the sample SentencePiece was fitted on, before workers are forked
    dtype = id_dtype(max(pair.src.vocab_size, pair.tgt.vocab_size))

    def build(folder: Path) -> DataManifest:
        with progress_bar(f"encoding ({pair.src.kind}, {workers} processes)") as bar:
            stats = _encode_corpus(cfg, folder, pair, dtype, train, evaluation, check_stop, bar)
            if given is not None:
                log.info("%s", unknown_line(stats["train"].oov_rate(), langs))
            encoded = encode_parts(cfg, folder, parts, pair, dtype, None, check_stop, bar)
        check_enough(cfg, stats["train"], train.empty, sum(e.record.pairs for e in encoded.values()))
        if not pair.src.lowercase:  # learned once, here; stored in tokenizer.json
            pair.recaser = Truecaser.from_counts(stats["train"].spellings)
        pair.save(folder)
        (folder / "config.yaml").write_text(encoded_with(cfg, given).to_yaml(), encoding="utf-8")
        outputs = {p.name: file_record(p, current_sha256(p)) for p in sorted(folder.iterdir()) if p.is_file()}
        return DataManifest(
            **{f.name: getattr(origin, f.name) for f in dataclasses.fields(Origin)},
            vocab_size=VocabSizes(pair.src.vocab_size, pair.tgt.vocab_size),
            tokenizer_sha256=pair.vocabulary_digest(),
            joint_vocab=pair.joint,
            id_dtype=dtype,
            shards={**{s: stats[s].shards for s in SPLITS}, **{n: e.shards for n, e in encoded.items()}},
            splits={**{s: stats[s].summary() for s in SPLITS}, **{n: e.stats.summary() for n, e in encoded.items()}},
            parts={n: e.record for n, e in encoded.items()},
            dropped=Dropped(train.empty, stats["train"].too_long),
            oov_rate_val=stats["val"].oov_rate(),
            versions=package_versions(),
            elapsed_s=round(time.monotonic() - started, 2),
            outputs=outputs,
            corpus=corpus_record(stats["train"], train.empty, [f for f in files if f.split == "train"], langs),
        )

    return pair, rewrite_folder(cfg.data_dir, build)


def _encode_corpus(
    cfg: Config,
    folder: Path,
    pair: TokenizerPair,
    dtype: str,
    train: TrainingPairs,
    evaluation: dict[str, tuple[list[str], list[str]]],
    check_stop: Callable[[], None] | None,
    bar: Any,
) -> dict[str, SplitStats]:
    """The corpus's splits encoded into `folder`: the training pairs in `train.workers`
    processes (spellings counted for the truecaser), the evaluation splits in one."""
    langs = (cfg.data.src_lang, cfg.data.tgt_lang)
    stats: dict[str, SplitStats] = {}
    train_settings = EncodeSettings(dtype, cfg.data.train_max_len, not pair.src.lowercase)
    with ChunkPool(train.workers, setup, (pair.state(), train_settings)) as pool:
        writer = ShardWriter(folder, "train", langs, dtype, cfg.data.shard_tokens)
        stats["train"] = encode_split(writer, train.chunks(), pool, check_stop, bar)
    with ChunkPool(1, setup, (pair.state(), EncodeSettings(dtype))) as pool:
        for s in EVAL_SPLITS:
            writer = ShardWriter(folder, s, langs, dtype, cfg.data.shard_tokens)
            stats[s] = encode_split(writer, _chunked(evaluation[s]), pool, check_stop, bar)
    return stats
