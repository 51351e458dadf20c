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
from ..data.sources import CorpusFile, explicit_source, fetch_corpus, iter_line_blocks, read_lines, resolve_source
from ..fsutil import atomic_write, atomic_write_json, file_record, file_sha256, recorded_sha256
from ..model_io import read_model
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
    made (or brought up to date) first."""
    if not cfg.synthetic.enabled:
        return cfg
    folder = synthesize(cfg, check_stop)
    out = copy.deepcopy(cfg)
    out.data.corpus, out.data.source, out.data.sha256 = "files", str(folder), {}
    out.data.splits.train = "train"
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
    """Make `cfg`'s synthetic folder complete and current; returns it."""
    folder = synthetic_folder(cfg)
    folder.mkdir(parents=True, exist_ok=True)
    real = {(f.split, f.lang): f for f in fetch_corpus(cfg.data, explicit_source(cfg.data) or resolve_source(cfg.data))}
    evaluation = {comparable(line) for (split, _), f in real.items() if split != "train" for line in read_lines(f.path)}
    parts = [
        part
        for part in (
            _back_translation(cfg, folder, evaluation, check_stop),
            _forward_translation(cfg, folder, evaluation, check_stop),
        )
        if part
    ]
    langs = (cfg.data.src_lang, cfg.data.tgt_lang)
    identity = {
        "real": {f.path.name: f.sha256 for f in real.values()},
        "real_upsample": cfg.synthetic.real_upsample,
        "parts": {p.name: p.identity() for p in parts},
    }
    if _current(folder, identity):
        log.info("synthetic corpus up to date: %s", folder)
        return folder
    _write_train(folder, langs, real, parts, cfg.synthetic.real_upsample)
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
    return folder


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
    folder: Path, langs: tuple[str, str], real: dict[tuple[str, str], CorpusFile], parts: list[Part], upsample: int
) -> None:
    """train.<src> and train.<tgt>, side by side, each written atomically."""

    def side(index: int) -> Callable[[BinaryIO], None]:
        def write(f: BinaryIO) -> None:
            for _ in range(upsample):
                for block in iter_line_blocks(real[("train", langs[index])].path, BLOCK_LINES):
                    f.write("".join(f"{line}\n" for line in block).encode("utf-8"))
            for part in parts:
                f.write("".join(f"{pair[index]}\n" for pair in part.pairs()).encode("utf-8"))

        return write

    for index, lang in enumerate(langs):
        atomic_write(folder / f"train.{lang}", side(index))


def _decode(
    base: DecodeConfig, batch_size: int, beam_size: int, strategy: str = "auto", topk: int = 0, temperature: float = 1.0
) -> DecodeConfig:
    d = copy.deepcopy(base)
    d.beam_size, d.n_best, d.recase, d.batch_size, d.strategy = beam_size, 1, False, batch_size, strategy
    d.sampling_topk, d.sampling_temperature = topk, temperature
    return d


def _back_translation(
    cfg: Config, folder: Path, evaluation: set[str], check_stop: Callable[[], None] | None
) -> Part | None:
    bt, sc = cfg.synthetic.back_translation, cfg.synthetic
    if not bt.text:
        return None
    files = text_files(cfg, bt.text, cfg.data.tgt_lang, "synthetic.back_translation.text")
    text = clean_text(
        files, folder / "back_translation.text", evaluation, cfg.data.train_max_len, bt.max_lines, check_stop
    )
    log.info("back-translation text: %s", text.counts.summary())
    model = back_translation_model(cfg)
    sampled = bt.search == "sample"
    beam_size = 1 if sampled else bt.beam_size
    identity = {
        "models": [read_model(model)[0].sha256],
        "search": bt.search,
        "seed": sc.seed,
        "beam_size": beam_size,
        "chunk_lines": sc.chunk_lines,
        "batch_size": sc.batch_size,
        **({"sampling_topk": bt.sampling_topk, "sampling_temperature": bt.sampling_temperature} if sampled else {}),
    }
    part = Part(
        "back_translation", text, _cache(cfg, "back", identity), "src", BACK_TRANSLATION_TAG if bt.tag else None
    )
    post: PostProcess | None = noised if bt.search == "noised_beam" else None
    _generate(
        cfg,
        part,
        [model],
        None,
        "log",
        post,
        check_stop,
        lambda base: _decode(
            base, sc.batch_size, beam_size, "sample" if sampled else "auto", bt.sampling_topk, bt.sampling_temperature
        ),
    )
    return part


def _forward_translation(
    cfg: Config, folder: Path, evaluation: set[str], check_stop: Callable[[], None] | None
) -> Part | None:
    ft, sc = cfg.synthetic.forward_translation, cfg.synthetic
    if not ft.text:
        return None
    files = text_files(cfg, ft.text, cfg.data.src_lang, "synthetic.forward_translation.text")
    text = clean_text(
        files, folder / "forward_translation.text", evaluation, cfg.data.train_max_len, ft.max_lines, check_stop
    )
    log.info("forward-translation text: %s", text.counts.summary())
    models = [Path(t) for t in ft.teachers]
    identity = {
        "models": [read_model(m)[0].sha256 for m in models],
        "search": "beam",
        "beam_size": ft.beam_size,
        "weights": ft.weights,
        "combine": ft.combine,
        "chunk_lines": sc.chunk_lines,
        "batch_size": sc.batch_size,
    }
    part = Part(
        "forward_translation",
        text,
        _cache(cfg, "forward", identity),
        "tgt",
        FORWARD_TRANSLATION_TAG if ft.tag else None,
    )
    _generate(
        cfg,
        part,
        models,
        ft.weights,
        ft.combine,
        None,
        check_stop,
        lambda base: _decode(base, sc.batch_size, ft.beam_size),
    )
    return part


def _cache(cfg: Config, kind: str, identity: dict[str, Any]) -> TranslationCache:
    root = Path(cfg.synthetic.cache_dir)
    return TranslationCache(cache_folder(root, kind, identity), identity)


def _generate(
    cfg: Config,
    part: Part,
    models: list[Path],
    weights: list[float] | None,
    combine: str,
    post: PostProcess | None,
    check_stop: Callable[[], None] | None,
    decode: Callable[[DecodeConfig], DecodeConfig],
) -> None:
    """Translate what `part`'s cache lacks with `models` (opened only when there is work)."""
    if not part.cache.missing(part.text.keys).any():
        return
    from ..api import open_backend

    # A fixed thread count: a chunk translated again after a kill must round as it did.
    backend = open_backend(
        models,
        cfg.train.device,
        "fp32",
        threads=start_count(cfg.train.threads),
        ensemble_weights=weights,
        ensemble_combine=combine,
    )
    part.generation = translate_missing(
        part.text,
        part.cache,
        backend,
        decode(backend.decode),
        cfg.synthetic.chunk_lines,
        cfg.synthetic.seed,
        part.name.replace("_", "-"),
        post,
        check_stop,
    )
