"""The training corpus of a config that makes pairs by translating text (a `synthetic:` or a
`distill:` section: synthetic/directions.py), in `<data.dir>/<name>.synthetic/`:

    train.<src>, train.<tgt>   the real training pairs (synthetic.real_upsample times; with
                               distill:, once with distill.keep_original, else not), then the
                               back-translated pairs (synthetic source, optionally tagged; the
                               text as target), then the forward-translated pairs (the text as
                               source; synthetic target), then the distilled ones (the training
                               sources and the teachers' translations)
    <val and test files>       copied from the real corpus
    synthetic.json             what the corpus was made of (inputs' and caches' identities), the
                               cleaning counts, the cost of the translations made for it

Preprocessing and training use the folder as a `files` corpus. It is remade when its inputs
change (a line added to the text, another model, the real corpus), and the translation caches
(synthetic/cache.py) make that cheap: a night with new lines translates those lines alone.

One process makes a folder at a time (`.<name>.synthetic.lock` beside it; another waits, then
finds it current); processes making other configs' folders share the caches they have in
common, each translating lines the others have not taken. With `data.limit_train`, the limit
applies to each source: at most that many real pairs, and that many lines of each text
(translated only as far as they are used).
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from ..config import Config
from ..data.sources import (
    CorpusFile,
    explicit_source,
    fetch_corpus,
    iter_line_blocks,
    iter_parallel,
    read_lines,
    resolve_source,
)
from ..errors import UsageError
from ..fsutil import atomic_write, atomic_write_json, exclusive_lock, file_record, file_sha256, recorded_sha256
from ..inference.translate import TranslationBackend
from ..threads import start_count
from ..tokenizers.text_marks import tagged
from .cache import TranslationCache, cache_folder
from .corpora import text_files
from .directions import Direction, directions, makes_pairs, real_copies
from .generate import Generation, translate_missing
from .lineage import chained, plan
from .text import BLOCK_LINES, CleanText, clean_text, comparable

log = logging.getLogger("tfm")
STATE = "synthetic.json"


def synthetic_folder(cfg: Config) -> Path:
    return Path(cfg.data.dir) / f"{cfg.name}.synthetic"


def training_corpus(cfg: Config, check_stop: Callable[[], None] | None = None) -> Config:
    """`cfg` itself when it makes no pairs; else a copy whose corpus is its synthetic folder,
    made (or brought up to date) first (data.limit_train applied there, to each source)."""
    if not makes_pairs(cfg):
        return cfg
    folder = synthesize(cfg, check_stop)
    out = copy.deepcopy(cfg)
    out.data.corpus, out.data.source, out.data.sha256 = "files", str(folder), {}
    out.data.splits.train = "train"
    out.data.limit_train = None
    return out


@dataclass
class Part:
    """The pairs made from one text: `synthetic_side` "src" (back-translation) or "tgt"."""

    name: str
    text: CleanText
    cache: TranslationCache
    synthetic_side: str
    tag: str | None
    earlier: list[TranslationCache] = field(default_factory=list)  # a replaced model's (lineage.py)
    generation: Generation = field(default_factory=Generation)
    empty: int = 0  # empty translations, counted by `pairs`

    def identity(self) -> dict[str, Any]:
        keys = hashlib.sha256(self.text.keys.tobytes()).hexdigest()
        out = {"translations": self.cache.identity, "lines_sha256": keys, "tag": self.tag}
        if self.earlier:  # and how many lines each version gives
            fresh = int((~self.cache.missing(self.text.keys)).sum())
            out["earlier"] = {"caches": [c.identity for c in self.earlier], "fresh_lines": fresh}
        return out

    def pairs(self) -> Iterator[tuple[str, str]]:
        """The pairs, in text order, but for lines whose translation is empty (`empty` counts
        them): a tag alone is no source."""
        translations = chained([self.cache, *self.earlier], self.text.keys)
        self.empty = 0
        for block in iter_line_blocks(self.text.path, BLOCK_LINES):
            for line in block:
                synthetic = next(translations)
                if not synthetic:
                    self.empty += 1
                    continue
                source, target = (synthetic, line) if self.synthetic_side == "src" else (line, synthetic)
                yield (tagged(self.tag, source) if self.tag else source), target

    def say_what_is_lost(self) -> None:
        """The lines left out for an empty translation: a warning (kept by --quiet) when that
        is every line, the part adding no pair."""
        what = self.name.replace("_", "-")
        if self.empty and self.empty == len(self.text.keys):
            log.warning(
                "warning: %s: all %d translations are empty: the text adds no pair (is the model trained?)",
                what,
                self.empty,
            )
        elif self.empty:
            log.info("%s: %d lines left out: their translations are empty", what, self.empty)


def synthesize(cfg: Config, check_stop: Callable[[], None] | None = None) -> Path:
    """Make `cfg`'s synthetic folder complete and current; returns it. Waits while another
    process makes the same folder."""
    folder = synthetic_folder(cfg)
    folder.parent.mkdir(parents=True, exist_ok=True)
    lock = folder.with_name(f".{folder.name}.lock")
    with exclusive_lock(lock, check_stop, lambda: log.info("waiting for another tfm process making %s", folder)):
        _synthesize(cfg, folder, check_stop)
    return folder


def help_translate(cfg: Config, check_stop: Callable[[], None] | None = None) -> None:
    """Translate what the caches of `cfg`'s texts lack beside the process that makes its corpus
    (`synthesize`): another rank of a torchrun launch, or a process `tfm synthesize
    --nproc-per-node` started. Each process takes the chunks no other has claimed (synthetic/
    cache.py), so the translations are those one process would make. Nothing but the caches is
    written (the cleaned text goes to a temporary folder)."""
    evaluation = evaluation_sentences(real_files(cfg))
    opened = [(d, open_models(cfg, d)) for d in directions(cfg)]
    with tempfile.TemporaryDirectory(prefix="tfm-synthesis-") as work:
        for d, backend in opened:
            _part(cfg, d, backend, Path(work), evaluation, check_stop)


def real_files(cfg: Config) -> dict[tuple[str, str], CorpusFile]:
    """The real corpus's files by (split, language)."""
    return {(f.split, f.lang): f for f in fetch_corpus(cfg.data, explicit_source(cfg.data) or resolve_source(cfg.data))}


def evaluation_sentences(real: dict[tuple[str, str], CorpusFile]) -> set[str]:
    """The `comparable` forms of every validation and test sentence, either side."""
    return {comparable(line) for (split, _), f in real.items() if split != "train" for line in read_lines(f.path)}


def _synthesize(cfg: Config, folder: Path, check_stop: Callable[[], None] | None) -> None:
    real = real_files(cfg)
    limit = cfg.data.limit_train
    if limit is not None:
        log.info("data.limit_train=%d applies to each source: the real pairs and each text", limit)
    # every model opened and checked before any text is read or translated
    opened = [(d, open_models(cfg, d)) for d in directions(cfg)]
    folder.mkdir(exist_ok=True)
    evaluation = evaluation_sentences(real)
    parts = [_part(cfg, d, backend, folder, evaluation, check_stop) for d, backend in opened]
    langs = (cfg.data.src_lang, cfg.data.tgt_lang)
    identity = {
        "real": {f.path.name: f.sha256 for f in real.values()},
        "real_upsample": real_copies(cfg),
        "parts": {p.name: p.identity() for p in parts},
        **({"limit_train": limit} if limit is not None else {}),
    }
    if _current(folder, identity):
        log.info("synthetic corpus up to date: %s", folder)
        return
    _write_train(folder, langs, real, parts, real_copies(cfg), limit)
    for part in parts:
        part.say_what_is_lost()
    if real_copies(cfg) == 0 and not cfg.distill.teachers:
        log.warning("warning: synthetic.real_upsample=0: the real pairs are not in the training corpus")
    for (split, lang), f in real.items():
        if split != "train":
            stem = getattr(cfg.data.splits, split)
            shutil.copyfile(f.path, folder / f"{stem}.{lang}{'.gz' if f.path.suffix == '.gz' else ''}")
    records = {p.name: file_record(p, file_sha256(p)) for p in (folder / f"train.{lang}" for lang in langs)}
    atomic_write_json(
        folder / STATE,
        {
            "identity": identity,
            "train_files": records,
            "text": {p.name: p.text.counts.to_json() for p in parts},
            "translated": {
                p.name: {
                    "lines": p.generation.lines,
                    "seconds": round(p.generation.seconds, 1),
                    "cpu_seconds": round(p.generation.cpu_seconds, 1),
                    # every translation in the cache, by whichever run or night made it
                    "empty": p.empty,  # left out: a line translated as nothing makes no pair
                    "cache_rows": p.cache.rows,
                    "cache_seconds": round(p.cache.cost.seconds, 1),
                    "cache_cpu_seconds": round(p.cache.cost.cpu_seconds, 1),
                }
                for p in parts
            },
        },
    )
    log.info("synthetic corpus: %s", folder)


def _current(folder: Path, identity: dict[str, Any]) -> bool:
    """Whether the folder holds the corpus of `identity`, its training files unchanged."""
    try:
        state = json.loads((folder / STATE).read_text(encoding="utf-8"))
        records = state["train_files"]
        return bool(
            state["identity"] == identity
            and all(recorded_sha256(folder / name, record) == record["sha256"] for name, record in records.items())
        )
    except (OSError, ValueError, KeyError, TypeError):
        return False


def _write_train(
    folder: Path,
    langs: tuple[str, str],
    real: dict[tuple[str, str], CorpusFile],
    parts: list[Part],
    upsample: int,
    limit: int | None,
) -> None:
    """train.<src> and train.<tgt>, side by side, each written atomically. With a `limit`, the
    real pairs are the first `limit` with text on both sides (those preprocessing would keep)."""
    train = [real[("train", lang)].path for lang in langs]

    def side(index: int) -> Callable[[BinaryIO], None]:
        def write(f: BinaryIO) -> None:
            for _ in range(upsample):
                left = limit
                for block in iter_parallel(train[0], train[1], BLOCK_LINES):
                    kept = [pair[index] for pair in zip(*block) if limit is None or all(x.strip() for x in pair)]
                    if left is not None:
                        kept, left = kept[:left], left - min(left, len(kept))
                    f.write("".join(f"{line}\n" for line in kept).encode("utf-8"))
                    if left == 0:
                        break
            for part in parts:
                f.write("".join(f"{pair[index]}\n" for pair in part.pairs()).encode("utf-8"))

        return write

    for index, lang in enumerate(langs):
        atomic_write(folder / f"train.{lang}", side(index))


def _part(
    cfg: Config,
    direction: Direction,
    backend: TranslationBackend,
    folder: Path,
    evaluation: set[str],
    check_stop: Callable[[], None] | None,
) -> Part:
    """The pairs `direction` makes of its text with its models (`backend`): the text cleaned
    (none left: refused), what the cache lacks translated."""
    text = cleaned_text(cfg, direction, folder, evaluation, check_stop)
    cache = open_cache(cfg, direction, backend, check_stop)
    decided = plan(cfg, direction, backend, cache, text.keys, check_stop)  # a replaced model's lines
    part = Part(direction.name, text, cache, direction.synthetic_side, direction.tag, decided.earlier)
    part.generation = translate_missing(
        text,
        cache,
        backend,
        direction.decode(backend.decode),
        direction.chunk_lines,
        cfg.synthetic.seed,
        direction.what,
        direction.post,
        check_stop,
        decided.pending,
    )
    return part


def cleaned_text(
    cfg: Config, direction: Direction, folder: Path, evaluation: set[str], check_stop: Callable[[], None] | None
) -> CleanText:
    """`direction`'s text cleaned into `folder` (refused when no line is left)."""
    files = text_files(cfg, direction.text, direction.languages[0], f"{direction.key}.text")
    limits = [n for n in (direction.max_lines, cfg.data.limit_train) if n is not None]
    out = folder / f"{direction.name}.text"
    text = clean_text(files, out, evaluation, cfg.data.train_max_len, min(limits, default=None), check_stop)
    log.info("%s text: %s", direction.what, text.counts.summary())
    if not text.counts.kept:
        raise UsageError(
            f"{direction.key}.text: {', '.join(str(f.path) for f in files)} yield no line to translate "
            f"({text.counts.summary()})"
        )
    return text


def open_cache(
    cfg: Config, direction: Direction, backend: TranslationBackend, check_stop: Callable[[], None] | None = None
) -> TranslationCache:
    """The translation cache of `direction`'s models (`backend`) and search."""
    identity = {"models": _model_digests(backend), **direction.search}
    where = cache_folder(Path(cfg.synthetic.cache_dir), direction.kind, identity)
    return TranslationCache(where, identity, check_stop)


def open_models(cfg: Config, direction: Direction) -> TranslationBackend:
    """`direction`'s models, opened once (their files verified on the way in), each refused
    unless it translates `direction.languages`."""
    from ..api import open_backend

    # A fixed thread count: a chunk translated again after a kill must round as it did.
    backend = open_backend(
        direction.models,
        cfg.train.device,
        "fp32",
        threads=start_count(cfg.train.threads),
        ensemble_weights=direction.weights,
        ensemble_combine=direction.combine,
    )
    members = backend.metadata.members
    found = [(m.path, m.languages) for m in members] or [(str(direction.models[0]), backend.metadata.languages)]
    wanted = direction.languages
    for path, languages in found:
        if languages is not None and languages != wanted:
            raise UsageError(
                f"{direction.models_key}: {path} translates {languages[0]}->{languages[1]}, but "
                f"{direction.what} for this config needs {wanted[0]}->{wanted[1]}"
            )
    return backend


def _model_digests(backend: TranslationBackend) -> list[str]:
    members = backend.metadata.members
    return [m.sha256 for m in members] if members else [backend.metadata.sha256]
