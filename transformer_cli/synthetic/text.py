"""Monolingual text cleaned for translation, streamed in two passes so that memory does not
grow with the text, only by an 8-byte key per line (three such arrays while repeats are found):

1. every line is read and dropped when it is empty, longer than the word limit, or equal to a
   validation or test sentence of either language (compared lowercased, without surrounding
   spaces and final punctuation: crowd-written captions often lack the full stop); the keys
   (a 64-bit hash) of the others are collected;
2. the first occurrence of each key is written out, up to `max_lines` lines; later ones are
   duplicates.

Unreadable input (non-UTF-8 bytes, a damaged gzip file) is one UsageError naming the file and
line (data/sources.iter_line_blocks), before anything is written.
"""

from __future__ import annotations

import hashlib
import string
from array import array
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np

from ..data.sources import iter_line_blocks
from ..fsutil import atomic_write
from .corpora import TextFile

BLOCK_LINES = 10_000
_TRAILING = string.punctuation + " \t"


def line_key(line: str) -> int:
    """The 64-bit key of a line (the translation cache's index)."""
    return int.from_bytes(hashlib.blake2b(line.encode("utf-8"), digest_size=8).digest(), "little")


def comparable(line: str) -> str:
    """How a line is compared with the evaluation sentences."""
    return " ".join(line.lower().split()).rstrip(_TRAILING)


@dataclass
class TextCounts:
    """What cleaning did, line by line."""

    read: int = 0
    kept: int = 0
    empty: int = 0
    too_long: int = 0
    in_val_or_test: int = 0
    duplicates: int = 0
    past_max_lines: int = 0

    def to_json(self) -> dict[str, int]:
        return asdict(self)

    def summary(self, limit: str = "max_lines") -> str:
        """One line of the counts; `limit`: the setting that cut the text short."""
        return (
            f"{self.read} lines read, {self.kept} kept; dropped: {self.empty} empty, "
            f"{self.too_long} too long, {self.in_val_or_test} equal to a val/test sentence, "
            f"{self.duplicates} repeated, {self.past_max_lines} past {limit}"
        )


@dataclass
class CleanText:
    """Kept lines (one per line of `path`) with their keys, in order."""

    path: Path
    keys: np.ndarray  # [lines] uint64
    counts: TextCounts


def clean_text(
    files: list[TextFile],
    out: Path,
    evaluation: set[str],
    max_words: int,
    max_lines: int | None,
    check_stop: Callable[[], None] | None = None,
) -> CleanText:
    """Clean `files` into `out` (written atomically), each kept line without surrounding
    spaces. `evaluation`: the `comparable` forms of the val and test sentences."""
    counts = TextCounts()
    candidates = array("Q")
    for line in _lines(files, check_stop):
        counts.read += 1
        if not line:
            counts.empty += 1
        elif len(line.split()) > max_words:
            counts.too_long += 1
        elif comparable(line) in evaluation:
            counts.in_val_or_test += 1
        else:
            candidates.append(line_key(line))
    keys = np.frombuffer(candidates, dtype=np.uint64) if candidates else np.zeros(0, np.uint64)
    keep = _first_occurrences(keys)
    counts.duplicates = int(len(keys) - keep.sum())
    if max_lines is not None:
        beyond = np.flatnonzero(keep)[max_lines:]
        keep[beyond] = False
        counts.past_max_lines = len(beyond)
    counts.kept = int(keep.sum())

    def write(f: BinaryIO) -> None:
        index = 0
        for line in _lines(files, check_stop):  # the same candidates, in the same order
            if line and len(line.split()) <= max_words and comparable(line) not in evaluation:
                if keep[index]:
                    f.write(line.encode("utf-8") + b"\n")
                index += 1

    atomic_write(out, write)
    return CleanText(out, keys[keep].copy(), counts)


def _first_occurrences(keys: np.ndarray) -> np.ndarray:
    """A bool per key: True where it occurs for the first time. Holds two 8-byte arrays per key
    at most (the stable order and the sorted keys), no array of the unique keys."""
    order = np.argsort(keys, kind="stable")
    ordered = keys[order]
    first = np.ones(len(keys), dtype=bool)
    np.not_equal(ordered[1:], ordered[:-1], out=first[1:])
    del ordered
    keep = np.zeros(len(keys), dtype=bool)
    keep[order[first]] = True
    return keep


def _lines(files: list[TextFile], check_stop: Callable[[], None] | None) -> Iterator[str]:
    """Every line of `files`, without surrounding spaces."""
    for text in files:
        for block in iter_line_blocks(text.path, BLOCK_LINES):
            if check_stop is not None:
                check_stop()
            for line in block:
                yield line.strip()
