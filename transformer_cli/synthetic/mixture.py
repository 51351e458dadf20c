"""The pairs a config makes by translating text (its `synthetic:` section:
synthetic/directions.py), one source of pairs per direction, in `<data.dir>/<name>.synthetic/`:

    <direction>.<src>, <direction>.<tgt>   the pairs, in the text's order: for back_translation
                               the synthetic sources and the text as targets; for
                               forward_translation the text as sources and the
                               synthetic targets (untagged: the tag is put in front when
                               batches are drawn, data/mixed.py)
    synthetic.json             what the pairs were made of (inputs' and caches' identities), the
                               cleaning counts, the cost of the translations made for them

Preprocessing encodes each direction's files into a split of its own beside the real corpus's
(data/parts.py: a night's new lines are appended, not the whole re-encoded), and training mixes
them when batches are drawn as training/mix_plan.py declares (the real pairs
`synthetic.real_weight` times, each direction's pairs by its weight, its tag in front). The files are
remade when their inputs change (a line added to the text, another model), and the
translation caches (synthetic/cache.py)
make that cheap: a night with new lines translates those lines alone.

One process makes a folder at a time (`.<name>.synthetic.lock` beside it; another waits, then
finds it current); processes making other configs' folders share the caches they have in
common, each translating lines the others have not taken. With `data.limit_train`, the limit
applies to each source: at most that many real pairs (preprocessing), and that many lines of
each text (translated only as far as they are used).
"""

from __future__ import annotations

import hashlib
import json
import logging
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from ..config import Config
from ..config_synthetic import PARALLEL
from ..data.parts import PartInput
from ..data.sources import (
    CorpusFile,
    explicit_source,
    fetch_corpus,
    iter_line_blocks,
    read_lines,
    resolve_source,
)
from ..errors import UsageError
from ..fsutil import atomic_write, atomic_write_json, exclusive_lock, file_record, file_sha256, recorded_sha256
from ..host.threads import start_count
from ..inference.translate import TranslationBackend
from .cache import TranslationCache, cache_folder
from .corpora import text_files
from .directions import Direction, directions
from .generate import Generation, translate_missing
from .lineage import chained, plan
from .text import BLOCK_LINES, CleanText, clean_text, comparable

log = logging.getLogger("tfm")
STATE = "synthetic.json"


def synthetic_folder(cfg: Config) -> Path:
    return Path(cfg.data.dir) / f"{cfg.name}.synthetic"


def synthetic_parts(cfg: Config, check_stop: Callable[[], None] | None = None) -> list[PartInput]:
    """The parts of pairs `cfg` makes by translating text (none when it makes none), made (or
    brought up to date) first."""
    if not cfg.synthetic.enabled:
        return []
    folder = synthesize(cfg, check_stop)
    langs = (cfg.data.src_lang, cfg.data.tgt_lang)
    return [PartInput(d.name, _part_paths(folder, d.name, langs)) for d in directions(cfg)]


def _part_paths(folder: Path, name: str, langs: tuple[str, str]) -> tuple[Path, Path]:
    return folder / f"{name}.{langs[0]}", folder / f"{name}.{langs[1]}"


@dataclass
class Part:
    """The pairs made from one text: `synthetic_side` "src" (back-translation) or "tgt"."""

    name: str
    text: CleanText
    cache: TranslationCache
    synthetic_side: str
    earlier: list[TranslationCache] = field(default_factory=list)  # a replaced model's (lineage.py)
    generation: Generation = field(default_factory=Generation)
    empty: int = 0  # empty translations, counted by `pairs`

    def identity(self) -> dict[str, Any]:
        keys = hashlib.sha256(self.text.keys.tobytes()).hexdigest()
        out = {"translations": self.cache.identity, "lines_sha256": keys}
        if self.earlier:  # and how many lines each version gives
            fresh = int((~self.cache.missing(self.text.keys)).sum())
            out["earlier"] = {"caches": [c.identity for c in self.earlier], "fresh_lines": fresh}
        return out

    def release(self) -> None:
        """Done with the caches (synthetic/cache.py's `release`: they may be pruned now)."""
        for cache in (self.cache, *self.earlier):
            cache.release()

    def pairs(self) -> Iterator[tuple[str, str]]:
        """The pairs, in text order, but for lines whose translation is empty (`empty` counts
        them): no pair has an empty side."""
        translations = chained([self.cache, *self.earlier], self.text.keys)
        self.empty = 0
        for block in iter_line_blocks(self.text.path, BLOCK_LINES):
            for line in block:
                synthetic = next(translations)
                if not synthetic:
                    self.empty += 1
                    continue
                yield (synthetic, line) if self.synthetic_side == "src" else (line, synthetic)

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
            _part(cfg, d, backend, Path(work), evaluation, check_stop).release()


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
    try:
        _write_folder(cfg, folder, parts)
    finally:
        for part in parts:
            part.release()


def _write_folder(cfg: Config, folder: Path, parts: list[Part]) -> None:
    """The parts' pairs and synthetic.json into `folder`, unless it holds them already."""
    limit = cfg.data.limit_train
    langs = (cfg.data.src_lang, cfg.data.tgt_lang)
    identity = {
        "parts": {p.name: p.identity() for p in parts},
        **({"limit_train": limit} if limit is not None else {}),
    }
    sc = cfg.synthetic  # (forward translation of the real sources: they are in it, a distilled student)
    if sc.real_weight == 0 and PARALLEL not in sc.forward_translation.text:
        log.warning("warning: synthetic.real_weight=0: the real pairs are not in the training corpus")
    if _current(folder, identity):
        log.info("synthetic pairs up to date: %s", folder)
        return
    for part in parts:
        _write_pairs(part, _part_paths(folder, part.name, langs))
        part.say_what_is_lost()
    files = [path for part in parts for path in _part_paths(folder, part.name, langs)]
    atomic_write_json(
        folder / STATE,
        {
            "identity": identity,
            "part_files": {p.name: file_record(p, file_sha256(p)) for p in files},
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
    log.info("synthetic pairs: %s", folder)


def _current(folder: Path, identity: dict[str, Any]) -> bool:
    """Whether the folder holds the pairs of `identity`, their files unchanged."""
    try:
        state = json.loads((folder / STATE).read_text(encoding="utf-8"))
        records = state["part_files"]
        return bool(
            state["identity"] == identity
            and all(recorded_sha256(folder / name, record) == record["sha256"] for name, record in records.items())
        )
    except (OSError, ValueError, KeyError, TypeError):
        return False


def _write_pairs(part: Part, paths: tuple[Path, Path]) -> None:
    """The part's pairs into its two files, each written atomically (the source side first:
    both are read only once synthetic.json records them)."""
    for index, path in enumerate(paths):

        def write(f: BinaryIO, index: int = index) -> None:
            block: list[str] = []
            for pair in part.pairs():
                block.append(f"{pair[index]}\n")
                if len(block) == BLOCK_LINES:
                    f.write("".join(block).encode("utf-8"))
                    block = []
            f.write("".join(block).encode("utf-8"))

        atomic_write(path, write)


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
    part = Part(direction.name, text, cache, direction.synthetic_side, decided.earlier)
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
    own = f"{direction.key}.max_lines"
    limits = [(n, key) for n, key in ((direction.max_lines, own), (cfg.data.limit_train, "data.limit_train")) if n]
    max_lines, limit = min(limits, default=(None, own))  # the lower limit cuts the text
    out = folder / f"{direction.name}.text"
    text = clean_text(files, out, evaluation, cfg.data.train_max_len, max_lines, check_stop)
    log.info("%s text: %s", direction.what, text.counts.summary(limit))
    if not text.counts.kept:
        raise UsageError(
            f"{direction.key}.text: {', '.join(str(f.path) for f in files)} yield no line to translate "
            f"({text.counts.summary(limit)})"
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
    try:
        backend = open_backend(
            direction.models,
            cfg.train.device,
            "fp32",
            threads=start_count(cfg.train.threads),
            ensemble_weights=direction.weights,
            ensemble_combine=direction.combine,
        )
    except UsageError as e:  # a model missing or unfit: the key that names it
        raise UsageError(f"{direction.models_key}: {e}") from None
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
