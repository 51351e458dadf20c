"""Sequence-level knowledge distillation (Kim & Rush 2016): a student learns from a teacher's
translations of the training sources instead of (or beside) the reference targets.

A config with a `distill:` section names its teachers (one model or an ensemble, decoded
with beam search); its training corpus becomes the folder `<data.dir>/<name>.distilled/`:

    train.<src>, train.<tgt>      the original sources and the teachers' translations of them
                                  (with distill.keep_original: the original pairs follow)
    <val and test files>          copied from the original source, as they are
    distill.json                  what the translations depend on (the teachers' sha256s, the
                                  search, the sources' sha256) and how far they have come

The translation is the long step at scale, so it streams and resumes: the sources are read
in chunks of distill.chunk_lines, each chunk's translations are appended to train.<tgt>.partial and
flushed to disk before distill.json records them; a stopped or killed run continues after
the last recorded chunk (a half-written one is cut off), and gives the same file, byte for
byte, as an uninterrupted one (each chunk is decoded the same way, whichever run does it).
Other teachers, settings or sources start it over. `tfm distill -c CFG` makes the corpus;
`tfm preprocess` and `tfm train` make it when it is not complete, then use it as the corpus.
With data.limit_train, only the pairs preprocessing keeps (the first data.limit_train with text
on both sides) are translated; the distilled folder holds just those (and, with
distill.keep_original, the same pairs after them), so the student's data is not limited again.
"""

from __future__ import annotations

import copy
import json
import logging
import os
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ..config import Config
from ..data.preprocess import TrainingPairs
from ..data.sources import CorpusFile, explicit_source, fetch_corpus, iter_parallel, resolve_source
from ..fsutil import atomic_write_json, file_sha256
from ..tokenizers.base import Chunk

log = logging.getLogger("tfm")

STATE = "distill.json"


def distilled_folder(cfg: Config) -> Path:
    return Path(cfg.data.dir) / f"{cfg.name}.distilled"


def training_corpus(cfg: Config, check_stop: Callable[[], None] | None = None) -> Config:
    """`cfg` itself without a distill: section; else a copy whose corpus is the distilled
    folder, made (or completed) first."""
    if not cfg.distill.teachers:
        return cfg
    folder = distill(cfg, check_stop)
    out = copy.deepcopy(cfg)
    out.data.corpus, out.data.source, out.data.sha256 = "files", str(folder), {}
    out.data.splits.train = "train"
    out.data.limit_train = None  # the folder holds the kept pairs only (twice: keep_original)
    return out


def _original_files(cfg: Config) -> dict[tuple[str, str], CorpusFile]:
    files = fetch_corpus(cfg.data, explicit_source(cfg.data) or resolve_source(cfg.data))
    return {(f.split, f.lang): f for f in files}


def distill(cfg: Config, check_stop: Callable[[], None] | None = None) -> Path:
    """Make the distilled corpus of `cfg` complete; returns its folder."""
    from ..api import open_backend
    from ..model_io import read_model

    dc, langs = cfg.distill, (cfg.data.src_lang, cfg.data.tgt_lang)
    folder = distilled_folder(cfg)
    files = _original_files(cfg)
    src, tgt = files[("train", langs[0])], files[("train", langs[1])]
    teachers = [
        {"path": str(path), "sha256": checkpoint.sha256} for checkpoint, path in (read_model(t) for t in dc.teachers)
    ]
    identity = _identity(cfg, teachers, src, tgt)
    state = _state(folder, identity)
    if state.get("complete"):
        return folder
    teacher = open_backend(
        [Path(t) for t in dc.teachers],
        cfg.train.device,
        "fp32",
        ensemble_weights=dc.weights,
        ensemble_combine=dc.combine,
    )
    done, total = state["lines"], sum(len(sources) for sources, _ in _training_pairs(cfg, files))
    partial = folder / f"train.{langs[1]}.partial"
    decode = copy.deepcopy(teacher.decode)
    decode.beam_size, decode.n_best, decode.recase = dc.beam_size, 1, False
    decode.batch_size = dc.batch_size
    log.info(
        "distillation: %s %d of %d training sources with %s (beam %d)%s",
        "continuing at" if done else "translating",
        done,
        total,
        " + ".join(dc.teachers),
        dc.beam_size,
        f" into {folder}" if not done else "",
    )
    started, translated = time.monotonic(), 0
    with open(partial, "ab") as out:
        for start, chunk in _chunks(_training_pairs(cfg, files), done):
            if check_stop is not None:
                check_stop()
            lines = teacher.translate(chunk, decode, check_stop).translations
            out.write("".join(f"{hyps[0].text}\n" for hyps in lines).encode("utf-8"))
            out.flush()
            os.fsync(out.fileno())
            done = start + len(chunk)
            translated += len(chunk)
            atomic_write_json(folder / STATE, {**identity, "lines": done, "bytes": out.tell(), "complete": False})
            rate = translated / max(time.monotonic() - started, 1e-9)
            log.info("distillation: %d of %d sources translated (%.1f sentences/s)", done, total, rate)
    _finish(cfg, folder, files, partial, identity, done)
    return folder


def _identity(cfg: Config, teachers: list[dict[str, Any]], src: CorpusFile, tgt: CorpusFile) -> dict[str, Any]:
    """What the translations depend on: another value starts them over."""
    dc = cfg.distill
    return {
        "teachers": teachers,
        "beam_size": dc.beam_size,
        "combine": dc.combine,
        "weights": dc.weights,
        "keep_original": dc.keep_original,
        "chunk_lines": dc.chunk_lines,
        "sources_sha256": src.sha256,
        "targets_sha256": tgt.sha256,
        "limit_train": cfg.data.limit_train,
    }  # (None: as a record made before it was there)


def _state(folder: Path, identity: dict[str, Any]) -> dict[str, Any]:
    """Where a distillation of this identity stands (its partial file cut to what was
    recorded); a fresh start, with the folder emptied, for any other."""
    try:
        state = json.loads((folder / STATE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        state = None
    if isinstance(state, dict) and {k: state.get(k) for k in identity} == identity:
        if state.get("complete"):
            return state
        partial = next(folder.glob("train.*.partial"), None)
        if partial is not None and partial.stat().st_size >= state["bytes"]:
            with open(partial, "r+b") as f:  # a chunk written after the last record is dropped
                f.truncate(state["bytes"])
            return state
    if folder.exists():
        if state is not None:
            log.info("distillation: the teachers, settings or sources changed: starting over")
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    return {"lines": 0, "bytes": 0}


def _training_pairs(cfg: Config, files: dict[tuple[str, str], CorpusFile]) -> Iterator[Chunk]:
    """The training pairs the teachers translate, in chunks of distill.chunk_lines: every line
    of the files (their alignment checked); with data.limit_train, the pairs preprocessing
    keeps of them (data/preprocess.TrainingPairs)."""
    langs, size = (cfg.data.src_lang, cfg.data.tgt_lang), cfg.distill.chunk_lines
    src, tgt = files[("train", langs[0])].path, files[("train", langs[1])].path
    if cfg.data.limit_train is None:
        return iter_parallel(src, tgt, size)
    return _rechunked(TrainingPairs(src, tgt, cfg.data.limit_train).chunks(), size)


def _rechunked(chunks: Iterator[Chunk], size: int) -> Iterator[Chunk]:
    """The pairs of `chunks` in chunks of `size` (the last one shorter)."""
    sources: list[str] = []
    targets: list[str] = []
    for more_sources, more_targets in chunks:
        sources += more_sources
        targets += more_targets
        while len(sources) >= size:
            yield sources[:size], targets[:size]
            del sources[:size], targets[:size]
    if sources:
        yield sources, targets


def _chunks(pairs: Iterator[Chunk], skip: int) -> Iterator[tuple[int, list[str]]]:
    """(index of the first pair, sources) per chunk of `pairs`, from pair `skip` on."""
    start = 0
    for sources, _ in pairs:
        if start >= skip:
            yield start, sources
        start += len(sources)


def _finish(
    cfg: Config,
    folder: Path,
    files: dict[tuple[str, str], CorpusFile],
    partial: Path,
    identity: dict[str, Any],
    lines: int,
) -> None:
    """The sources beside the translations (and the original pairs after them when asked),
    the evaluation splits copied; then the record says complete."""
    langs = (cfg.data.src_lang, cfg.data.tgt_lang)
    sources = folder / f"train.{langs[0]}"
    targets = folder / f"train.{langs[1]}"
    with open(sources, "w", encoding="utf-8") as out:
        for _, chunk in _chunks(_training_pairs(cfg, files), 0):
            out.write("".join(f"{line}\n" for line in chunk))
    if cfg.distill.keep_original:
        with open(sources, "a", encoding="utf-8") as out_src, open(partial, "a", encoding="utf-8") as out_tgt:
            for chunk_src, chunk_tgt in _training_pairs(cfg, files):
                out_src.write("".join(f"{line}\n" for line in chunk_src))
                out_tgt.write("".join(f"{line}\n" for line in chunk_tgt))
    os.replace(partial, targets)
    stems = {"val": cfg.data.splits.val, "test": cfg.data.splits.test}
    for split, stem in stems.items():
        for lang in langs:
            original = files[(split, lang)].path
            suffix = ".gz" if original.suffix == ".gz" else ""
            shutil.copyfile(original, folder / f"{stem}.{lang}{suffix}")
    atomic_write_json(
        folder / STATE,
        {
            **identity,
            "lines": lines,
            "complete": True,
            "train_sha256": {p.name: file_sha256(p) for p in (sources, targets)},
        },
    )
    log.info("distillation: complete: %s", folder)
