"""Opt-in self-training text: the sources `tfm serve` translated, kept in `<store>/served.<src>`
(corrections.served_per_day), one a line, each once, at most that many a day (UTC) by each
server, appended under a lock so every server of the store writes one file. A config names the file in
`synthetic.forward_translation.text`, and its next run translates the new lines alone (the
translation cache and data/parts.py's appends)."""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

from ..fsutil import append_whole_lines, exclusive_lock
from .state import DAY_S, normalised


def _key(line: str) -> bytes:
    return hashlib.blake2b(line.encode("utf-8"), digest_size=8).digest()


class ServedText:
    """The served-sources file of one store and language (see the module docstring)."""

    def __init__(self, folder: Path | str, lang: str, per_day: int):
        self.path = Path(folder) / f"served.{lang}"
        self.per_day = per_day
        self._read = 0  # bytes of the file whose lines are in _seen
        self._seen: set[bytes] = set()
        self._day, self._today = -1, 0  # lines this process appended on that day

    def _catch_up(self) -> None:
        """The keys of the lines other processes appended since the last look."""
        try:
            with open(self.path, "rb") as f:
                f.seek(self._read)
                for line in f:
                    if not line.endswith(b"\n"):
                        break
                    self._seen.add(_key(line[:-1].decode("utf-8")))
                    self._read += len(line)
        except FileNotFoundError:
            return

    def add(self, lines: list[str]) -> int:
        """Append the lines not kept before, within the day's bound; how many were appended."""
        day = int(time.time() // DAY_S)
        if day != self._day:
            self._day, self._today = day, 0
        if self._today >= self.per_day:
            return 0
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with exclusive_lock(self.path.with_name(f".{self.path.name}.lock")):
            self._catch_up()
            new: list[str] = []
            for line in map(normalised, lines):
                if line and _key(line) not in self._seen and self._today + len(new) < self.per_day:
                    self._seen.add(_key(line))
                    new.append(line)
            if new:
                data = "".join(f"{line}\n" for line in new).encode("utf-8")
                fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
                try:
                    append_whole_lines(fd, data, sync=False)
                finally:
                    os.close(fd)
                self._read += len(data)
        self._today += len(new)
        return len(new)
