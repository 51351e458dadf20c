"""Translating the lines of a cleaned text that its cache lacks, a chunk at a time.

The lines missing from the cache are taken in text order and cut into chunks of
`chunk_lines`; each chunk is translated (a sampled search draws with a seed made from the run's
seed and the chunk's first line), post-processed (noised back-translation), then appended to
the cache. A run stopped or killed continues with the first chunk the cache lacks, which is the
chunk an uninterrupted run would have translated next: the cache ends the same, byte for byte.
"""

from __future__ import annotations

import copy
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..config import DecodeConfig
from ..inference.translate import TranslationBackend
from .cache import Cost, TranslationCache
from .text import CleanText, read_lines_at

log = logging.getLogger("tfm")

PostProcess = Callable[[str, int], str]  # (translation, seed) -> the line kept


@dataclass
class Generation:
    """What one call translated, and its cost."""

    lines: int = 0
    seconds: float = 0.0
    cpu_seconds: float = 0.0  # of this process, all its threads


def chunk_seed(seed: int, first_key: int) -> int:
    return (seed * 1_000_003 ^ first_key) & 0x7FFF_FFFF


def translate_missing(
    text: CleanText,
    cache: TranslationCache,
    backend: TranslationBackend,
    decode: DecodeConfig,
    chunk_lines: int,
    seed: int,
    what: str,
    post: PostProcess | None = None,
    check_stop: Callable[[], None] | None = None,
) -> Generation:
    """Translate the lines of `text` that `cache` lacks into it (`what` names the work in
    the log lines). `decode` is used as given, but for the seed of a sampled search."""
    rows = np.flatnonzero(cache.missing(text.keys))
    done = Generation()
    if not len(rows):
        return done
    log.info(
        "%s: translating %d of %d lines (%d already translated)",
        what,
        len(rows),
        len(text.keys),
        len(text.keys) - len(rows),
    )
    started, cpu_started = time.monotonic(), time.process_time()
    chunk: list[str] = []
    chunk_rows: list[int] = []
    for row, line in read_lines_at(text.path, rows):
        chunk.append(line)
        chunk_rows.append(row)
        if len(chunk) == chunk_lines or len(chunk_rows) + done.lines == len(rows):
            keys = text.keys[np.array(chunk_rows)]
            _translate_chunk(chunk, keys, cache, backend, decode, seed, post, check_stop)
            done.lines += len(chunk)
            chunk, chunk_rows = [], []
            rate = done.lines / max(time.monotonic() - started, 1e-9)
            log.info("%s: %d of %d lines translated (%.1f lines/s)", what, done.lines, len(rows), rate)
    done.seconds = time.monotonic() - started
    done.cpu_seconds = time.process_time() - cpu_started
    return done


def _translate_chunk(
    lines: list[str],
    keys: np.ndarray,
    cache: TranslationCache,
    backend: TranslationBackend,
    decode: DecodeConfig,
    seed: int,
    post: PostProcess | None,
    check_stop: Callable[[], None] | None,
) -> None:
    if check_stop is not None:
        check_stop()
    started, cpu_started = time.monotonic(), time.process_time()
    d = copy.copy(decode)
    d.sampling_seed = chunk_seed(seed, int(keys[0]))
    outputs = backend.translate(lines, d, check_stop).translations
    texts = [" ".join(hyps[0].text.split()) for hyps in outputs]  # one line each, always
    if post is not None:
        texts = [post(t, seed) for t in texts]
    cache.append(keys, texts, Cost(time.monotonic() - started, time.process_time() - cpu_started))
