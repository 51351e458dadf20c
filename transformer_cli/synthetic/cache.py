"""Translations kept by line: a folder per model and search (its `identity`), shared by every
config and night that translates with them, so that each line is translated once.

    keys.u64     the lines' 64-bit keys (synthetic/text.line_key), in the order translated
    ends.u64     where each translation ends in lines.txt (bytes)
    lines.txt    the translations, UTF-8, one per line
    cache.json   the identity, how many rows are complete, and what translating them cost
                 (seconds and CPU seconds, summed over every process that added rows)

Rows are appended a chunk at a time: the three files are written and flushed to disk, then
cache.json records the new count. Opening the cache cuts each file back to what cache.json
counts, so a chunk cut short by a kill is dropped and translated again, and the files equal
those of a run that was never stopped.
"""

from __future__ import annotations

import hashlib
import json
import mmap
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import TfmError
from ..fsutil import atomic_write_json

STATE = "cache.json"


@dataclass(frozen=True)
class Cost:
    """What translating some rows took: wall seconds and CPU seconds (all threads)."""

    seconds: float = 0.0
    cpu_seconds: float = 0.0


def cache_folder(root: Path, kind: str, identity: dict[str, Any]) -> Path:
    digest = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:16]
    return root / f"{kind}-{digest}"


class TranslationCache:
    """The translations of one model and search (see the module docstring)."""

    def __init__(self, folder: Path, identity: dict[str, Any]):
        self.folder, self.identity = folder, identity
        folder.mkdir(parents=True, exist_ok=True)
        self.rows, size, self.cost = self._recorded()
        for name, length in (("keys.u64", 8 * self.rows), ("ends.u64", 8 * self.rows), ("lines.txt", size)):
            path = folder / name
            with open(path, "ab") as f:  # created if missing
                if f.tell() < length:
                    raise TfmError(
                        f"{path}: shorter than {folder / STATE} records: a damaged translation "
                        f"cache; remove {folder} to translate again"
                    )
                f.truncate(length)
        self._keys = [np.fromfile(folder / "keys.u64", dtype=np.uint64)]
        self._order: np.ndarray | None = None

    @property
    def keys(self) -> np.ndarray:
        """The keys of the complete rows, in row order (the appended chunks joined once)."""
        if len(self._keys) > 1:
            self._keys = [np.concatenate(self._keys)]
        return self._keys[0]

    def _recorded(self) -> tuple[int, int, Cost]:
        """(complete rows, bytes of their translations, their cost) as cache.json says; nothing
        when new (a cache from before costs were kept: 0, with its rows)."""
        try:
            state = json.loads((self.folder / STATE).read_text(encoding="utf-8"))
        except FileNotFoundError:
            return 0, 0, Cost()
        except (OSError, ValueError) as e:
            raise TfmError(
                f"{self.folder / STATE}: unreadable ({e}); remove {self.folder} to translate again"
            ) from None
        if state.get("identity") != self.identity:
            raise TfmError(f"{self.folder}: a translation cache of another model or search")
        cost = state.get("cost", {})
        return int(state["rows"]), int(state["bytes"]), Cost(cost.get("seconds", 0.0), cost.get("cpu_seconds", 0.0))

    def missing(self, keys: np.ndarray) -> np.ndarray:
        """Which of `keys` have no translation yet (a bool per key)."""
        return ~np.isin(keys, self.keys)

    def append(self, keys: np.ndarray, translations: list[str], cost: Cost | None = None) -> None:
        """Add the translations of the lines `keys` (one line each, no newline in them), and
        what making them cost."""
        data = [t.encode("utf-8") + b"\n" for t in translations]
        with open(self.folder / "lines.txt", "ab") as f:
            start = f.tell()
            f.write(b"".join(data))
            self._sync(f)
        ends = start + np.cumsum([len(d) for d in data], dtype=np.uint64)
        for name, values in (("keys.u64", keys.astype(np.uint64)), ("ends.u64", ends)):
            with open(self.folder / name, "ab") as f:
                f.write(values.tobytes())
                self._sync(f)
        self._keys.append(keys.astype(np.uint64))
        self.rows += len(keys)
        self._order = None
        if cost is not None:
            self.cost = Cost(self.cost.seconds + cost.seconds, self.cost.cpu_seconds + cost.cpu_seconds)
        atomic_write_json(
            self.folder / STATE,
            {
                "identity": self.identity,
                "rows": self.rows,
                "bytes": int(ends[-1]) if len(ends) else start,
                "cost": {"seconds": round(self.cost.seconds, 3), "cpu_seconds": round(self.cost.cpu_seconds, 3)},
            },
        )

    @staticmethod
    def _sync(f: Any) -> None:
        f.flush()
        os.fsync(f.fileno())

    def translations(self, keys: np.ndarray) -> Iterator[str]:
        """The translation of each of `keys`, in order (every one must be in the cache)."""
        if not len(keys):
            return
        if self._order is None:
            self._order = np.argsort(self.keys, kind="stable")
        sorted_keys = self.keys[self._order]
        ends = np.fromfile(self.folder / "ends.u64", dtype=np.uint64)
        with open(self.folder / "lines.txt", "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as text:
            for block in range(0, len(keys), 65536):
                wanted = keys[block : block + 65536]
                positions = np.minimum(np.searchsorted(sorted_keys, wanted), len(sorted_keys) - 1)
                if not (sorted_keys[positions] == wanted).all():
                    raise TfmError(f"{self.folder}: lines missing from the translation cache")
                rows = self._order[positions]
                for row in rows.tolist():
                    start = int(ends[row - 1]) if row else 0
                    yield text[start : int(ends[row]) - 1].decode("utf-8")
