"""The training corpus of a config with a `synthetic:` section, in `<data.dir>/<name>.synthetic/`:

    train.<src>, train.<tgt>   the real training pairs (synthetic.real_upsample times), then the
                               back-translated pairs (synthetic source, optionally tagged; the
                               text as target), then the forward-translated pairs (the text as
                               source; synthetic target)
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
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from ..config import Config, DecodeConfig
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
from ..tokenizers.text_marks import BACK_TRANSLATION_TAG, FORWARD_TRANSLATION_TAG, tagged
from .cache import TranslationCache, cache_folder
from .corpora import text_files
from .generate import Generation, PostProcess, translate_missing
from .noise import noised
from .reverse import back_translation_model
from .text import BLOCK_LINES, CleanText, clean_text, comparable

log = logging.getLogger("tfm")
STATE = "synthetic.json"


def synthetic_folder(cfg: Config) -> Path:
    return Path(cfg.data.dir) / f"{cfg.name}.synthetic"


def training_corpus(cfg: Config, check_stop: Callable[[], None] | None = None) -> Config:
    """`cfg` itself without monolingual text; else a copy whose corpus is its synthetic folder,
    made (or brought up to date) first (data.limit_train applied there, to each source)."""
    if not cfg.synthetic.enabled:
        return cfg
    folder = synthesize(cfg, check_stop)
    out = copy.deepcopy(cfg)
    out.data.corpus, out.data.source, out.data.sha256 = "files", str(folder), {}
    out.data.splits.train = "train"
    out.data.limit_train = None
    return out


@dataclass(frozen=True)
class Direction:
    """One way of making pairs from text, read from the config: which side the text is, the
    models that translate it (their direction: `languages`), and how they search."""

    name: str  # the config section: back_translation, forward_translation
    kind: str  # the cache folder's prefix
    text: list[str]
    languages: tuple[str, str]  # what the models must translate: from the text's language
    synthetic_side: str  # the side the translations take in a pair: "src" or "tgt"
    models: list[Path]
    search: dict[str, Any]  # the search's settings, as the cache's identity records them
    decode: Callable[[DecodeConfig], DecodeConfig]
    tag: str | None
    max_lines: int | None
    weights: list[float] | None = None
    combine: str = "log"
    post: PostProcess | None = None

    @property
    def key(self) -> str:
        return f"synthetic.{self.name}"

    @property
    def models_key(self) -> str:
        """The config key that names the models."""
        return f"{self.key}.{'model' if self.name == 'back_translation' else 'teachers'}"

    @property
    def what(self) -> str:
        """The work's name in log lines and errors: back-translation, forward-translation."""
        return self.name.replace("_", "-")


def directions(cfg: Config) -> list[Direction]:
    """The config's ways of making pairs, those with text."""
    bt, ft, sc = cfg.synthetic.back_translation, cfg.synthetic.forward_translation, cfg.synthetic
    src, tgt = cfg.data.src_lang, cfg.data.tgt_lang
    out: list[Direction] = []
    if bt.text:
        sampled = bt.search == "sample"
        beam_size = 1 if sampled else bt.beam_size
        strategy = "sample" if sampled else "auto"
        sampling = {"sampling_topk": bt.sampling_topk, "sampling_temperature": bt.sampling_temperature}
        out.append(
            Direction(
                "back_translation",
                "back",
                bt.text,
                (tgt, src),
                "src",
                [back_translation_model(cfg)],
                {
                    "search": bt.search,
                    "seed": sc.seed,
                    "beam_size": beam_size,
                    "chunk_lines": sc.chunk_lines,
                    "batch_size": sc.batch_size,
                    **(sampling if sampled else {}),
                },
                lambda base: _decode(
                    base, sc.batch_size, beam_size, strategy, bt.sampling_topk, bt.sampling_temperature
                ),
                BACK_TRANSLATION_TAG if bt.tag else None,
                bt.max_lines,
                post=noised if bt.search == "noised_beam" else None,
            )
        )
    if ft.text:
        out.append(
            Direction(
                "forward_translation",
                "forward",
                ft.text,
                (src, tgt),
                "tgt",
                [Path(t) for t in ft.teachers],
                {
                    "search": "beam",
                    "beam_size": ft.beam_size,
                    "weights": ft.weights,
                    "combine": ft.combine,
                    "chunk_lines": sc.chunk_lines,
                    "batch_size": sc.batch_size,
                },
                lambda base: _decode(base, sc.batch_size, ft.beam_size),
                FORWARD_TRANSLATION_TAG if ft.tag else None,
                ft.max_lines,
                ft.weights,
                ft.combine,
            )
        )
    return out


@dataclass
class Part:
    """The pairs made from one text: `synthetic_side` "src" (back-translation) or "tgt"."""

    name: str
    text: CleanText
    cache: TranslationCache
    synthetic_side: str
    tag: str | None
    generation: Generation = field(default_factory=Generation)

    def identity(self) -> dict[str, Any]:
        keys = hashlib.sha256(self.text.keys.tobytes()).hexdigest()
        return {"translations": self.cache.identity, "lines_sha256": keys, "tag": self.tag}

    def pairs(self) -> Iterator[tuple[str, str]]:
        translations = self.cache.translations(self.text.keys)
        for block in iter_line_blocks(self.text.path, BLOCK_LINES):
            for line in block:
                synthetic = next(translations)
                source, target = (synthetic, line) if self.synthetic_side == "src" else (line, synthetic)
                yield (tagged(self.tag, source) if self.tag else source), target


def synthesize(cfg: Config, check_stop: Callable[[], None] | None = None) -> Path:
    """Make `cfg`'s synthetic folder complete and current; returns it. Waits while another
    process makes the same folder."""
    folder = synthetic_folder(cfg)
    folder.parent.mkdir(parents=True, exist_ok=True)
    lock = folder.with_name(f".{folder.name}.lock")
    with exclusive_lock(lock, check_stop, lambda: log.info("waiting for another tfm process making %s", folder)):
        _synthesize(cfg, folder, check_stop)
    return folder


def _synthesize(cfg: Config, folder: Path, check_stop: Callable[[], None] | None) -> None:
    real = {(f.split, f.lang): f for f in fetch_corpus(cfg.data, explicit_source(cfg.data) or resolve_source(cfg.data))}
    evaluation = {comparable(line) for (split, _), f in real.items() if split != "train" for line in read_lines(f.path)}
    limit = cfg.data.limit_train
    if limit is not None:
        log.info("data.limit_train=%d applies to each source: the real pairs and each text", limit)
    # every model opened and checked before any text is read or translated
    opened = [(d, _open_models(cfg, d)) for d in directions(cfg)]
    folder.mkdir(exist_ok=True)
    parts = [_part(cfg, d, backend, folder, evaluation, check_stop) for d, backend in opened]
    langs = (cfg.data.src_lang, cfg.data.tgt_lang)
    identity = {
        "real": {f.path.name: f.sha256 for f in real.values()},
        "real_upsample": cfg.synthetic.real_upsample,
        "parts": {p.name: p.identity() for p in parts},
        **({"limit_train": limit} if limit is not None else {}),
    }
    if _current(folder, identity):
        log.info("synthetic corpus up to date: %s", folder)
        return
    _write_train(folder, langs, real, parts, cfg.synthetic.real_upsample, limit)
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


def _decode(
    base: DecodeConfig,
    batch_size: int,
    beam_size: int,
    strategy: str = "auto",
    topk: int = 0,
    temperature: float = 1.0,
) -> DecodeConfig:
    d = copy.deepcopy(base)
    d.beam_size, d.n_best, d.recase, d.batch_size, d.strategy = beam_size, 1, False, batch_size, strategy
    d.sampling_topk, d.sampling_temperature = topk, temperature
    return d


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
    lang = direction.languages[0]
    files = text_files(cfg, direction.text, lang, f"{direction.key}.text")
    limits = [n for n in (direction.max_lines, cfg.data.limit_train) if n is not None]
    out = folder / f"{direction.name}.text"
    text = clean_text(files, out, evaluation, cfg.data.train_max_len, min(limits, default=None), check_stop)
    log.info("%s text: %s", direction.what, text.counts.summary())
    if not text.counts.kept:
        raise UsageError(
            f"{direction.key}.text: {', '.join(str(f.path) for f in files)} yield no line to translate "
            f"({text.counts.summary()})"
        )
    identity = {"models": _model_digests(backend), **direction.search}
    where = cache_folder(Path(cfg.synthetic.cache_dir), direction.kind, identity)
    cache = TranslationCache(where, identity, check_stop)
    part = Part(direction.name, text, cache, direction.synthetic_side, direction.tag)
    part.generation = translate_missing(
        text,
        cache,
        backend,
        direction.decode(backend.decode),
        cfg.synthetic.chunk_lines,
        cfg.synthetic.seed,
        direction.what,
        direction.post,
        check_stop,
    )
    return part


def _open_models(cfg: Config, direction: Direction) -> TranslationBackend:
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
