"""Translating the lines of a cleaned text that its cache lacks, a chunk at a time.

The lines missing from the cache are taken in text order and cut into chunks of
`chunk_lines`; each chunk is translated (a sampled search draws with a seed made from the run's
seed and the chunk's first line), post-processed (noised back-translation), then appended to
the cache. Every chunk is claimed in the cache first (synthetic/cache.py), so processes that
translate the same text into one cache share the work, each taking the next chunk nobody has,
and cut the chunks one process alone would cut. A run stopped or killed continues with the
first chunk the cache lacks, which is the chunk an uninterrupted run would have translated
next: the translations end the same, byte for byte.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from ..config import DecodeConfig
from ..data.sources import iter_line_blocks
from ..inference.translate import TranslationBackend
from ..seams import SEARCH_STRATEGIES
from .cache import Cost, KeyIndex, TranslationCache
from .text import BLOCK_LINES, CleanText

log = logging.getLogger("tfm")

PostProcess = Callable[[str, int], str]  # (translation, seed) -> the line kept
WAIT_S = 0.5  # how often a process whose lines others are translating looks again


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
    wanted: np.ndarray | None = None,
) -> Generation:
    """Translate the lines of `text` that `cache` lacks into it (`wanted`: those of them to
    translate, a bool per line; default all), sharing the work with any other process
    translating into the cache; returns when they are all there (`what` names the work in the
    log lines). `decode` is used as given, but for the seed of a sampled search."""
    done = Generation()
    pending = cache.missing(text.keys)  # [lines] bool: not yet in the cache, as far as known
    if wanted is not None:
        pending &= wanted
    total = int(pending.sum())
    if not total:
        return done
    log.info("%s: translating %d of %d lines (%d already translated)", what, total, len(pending), len(pending) - total)
    index = KeyIndex(text.keys)
    lines = RowReader(text)
    started, cpu_started = time.monotonic(), time.process_time()
    waiting = False
    try:
        while True:
            rows = cache.claim(text.keys, pending, index, chunk_lines)
            if not len(rows):
                if not pending.any():
                    break
                if not waiting:
                    log.info("%s: waiting for another process translating the last lines into %s", what, cache.folder)
                    waiting = True
                if check_stop is not None:
                    check_stop()
                time.sleep(WAIT_S)
                continue
            _translate_chunk(lines.at(rows), text.keys[rows], cache, backend, decode, seed, post, check_stop)
            pending[rows] = False
            done.lines += len(rows)
            rate = done.lines / max(time.monotonic() - started, 1e-9)
            log.info(
                "%s: %d lines translated by this process (%.1f lines/s), %d left in all",
                what,
                done.lines,
                rate,
                int(pending.sum()),
            )
    finally:
        cache.close()
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
    outputs = backend.translate(lines, _seeded(decode, chunk_seed(seed, int(keys[0]))), check_stop).translations
    texts = [" ".join(hyps[0].text.split()) for hyps in outputs]  # one line each, always
    if post is not None:
        texts = [post(t, seed) for t in texts]
    cache.append(keys, texts, Cost(time.monotonic() - started, time.process_time() - cpu_started))


class RowReader:
    """The lines of a cleaned text at given rows, read forward through the file (chunks come
    in text order; a row before the last one read starts the file again)."""

    def __init__(self, text: CleanText):
        self.text = text
        self._lines: Iterator[str] | None = None
        self._row = 0  # the row `_lines` gives next

    def at(self, rows: np.ndarray) -> list[str]:
        """The lines at the sorted `rows`."""
        if self._lines is None or int(rows[0]) < self._row:
            self._lines, self._row = self._read(), 0
        out: list[str] = []
        for row in rows.tolist():
            for _ in range(row - self._row):
                next(self._lines)
            out.append(next(self._lines))
            self._row = row + 1
        return out

    def _read(self) -> Iterator[str]:
        for block in iter_line_blocks(self.text.path, BLOCK_LINES):
            yield from block


def _seeded(decode: DecodeConfig, seed: int) -> DecodeConfig:
    """`decode` with the chunk's `seed` when its strategy draws from one (a `seed` among its
    settings: sample), so that a chunk translates the same whichever run or rank does it."""
    strategy = decode.strategy
    settings = None if strategy in SEARCH_STRATEGIES.keywords else SEARCH_STRATEGIES.settings_of(strategy)
    if settings is None or "seed" not in {f.name for f in dataclasses.fields(settings)}:
        return decode
    d = copy.copy(decode)
    d.strategy_options = {**decode.strategy_options, "seed": seed}
    return d
