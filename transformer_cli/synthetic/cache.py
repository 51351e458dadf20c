"""Translations kept by line: a folder per model and search (its `identity`), shared by every
config, night and process that translates with them, so that each line is translated once.

    keys.u64      the lines' 64-bit keys (synthetic/text.line_key), in the order translated
    ends.u64      where each translation ends in lines.txt (bytes)
    lines.txt     the translations, UTF-8, one per line
    cache.json    the format, the identity, how many rows are complete, and what translating
                  them cost (seconds and CPU seconds, summed over every process that added rows);
                  checked whole when read (`State`): one that cannot be read or parsed, or whose
                  fields have the wrong type or range, is one line naming the field ("unreadable
                  (…); remove <folder> to translate again")
    .lock         flock()ed exclusively for the moment a process reads the state or appends
    claims/       one file per process translating into the cache now: the keys of the chunk it
                  is translating, flock()ed by it for as long as it lives
    .in-use       flock()ed shared by every process that has the cache open (to read or to
                  translate into it), for as long as it does (`release`, or the object's end);
                  a pruner (synthetic/lineage.py) removes the folder only once it holds it
                  exclusively, after renaming the folder away (`remove`); a process that opens
                  the cache checks, once it holds its share, that the file is still the
                  folder's, and else opens (or makes) the folder anew

Several processes may translate into one cache at once (`tfm synthesize` and `tfm train` runs
of configs that share it, the ranks of a torchrun launch). Everything they read or write of the
cache happens under `.lock`: a process re-reads cache.json there (the rows others appended
since), takes as its next chunk the first lines that are neither translated nor claimed by a
live process (`claim`), and appends at the end cache.json records, never at a file offset it
saw earlier. The chunks are those one process alone would have cut, so the translations (and
the corpus made of them) are the same, byte for byte, however many processes made them. A
claim of a process that died goes to the next process that asks.

Rows are appended a chunk at a time: the three files are written and flushed to disk, then
cache.json records the new count. Opening the cache cuts each file back to what cache.json
counts, so a chunk cut short by a kill is dropped and translated again. A cache whose files
disagree with each other (such as two unlocked writers of an earlier tfm left) is not trusted:
it is emptied, with a warning, and its lines are translated again.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import math
import mmap
import os
import uuid
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import TfmError
from ..fsutil import atomic_write_json, close_lock, exclusive_lock, track_lock
from ..records import RecordError, from_json
from .cache_folders import let_go, use

log = logging.getLogger("tfm")
STATE = "cache.json"
FORMAT = 2  # 2: written under a lock (1, unversioned: an earlier tfm's, checked before use)
FILES = ("keys.u64", "ends.u64", "lines.txt")
CHECK_BLOCK = 1 << 24  # bytes of lines.txt looked at a time when the cache is checked
CHECK_ROWS = 1 << 20  # rows of ends.u64 (or keys) looked at a time


@dataclass(frozen=True)
class Cost:
    """What translating some rows took: wall seconds and CPU seconds (all threads)."""

    seconds: float = 0.0
    cpu_seconds: float = 0.0

    def __add__(self, other: Cost) -> Cost:
        return Cost(self.seconds + other.seconds, self.cpu_seconds + other.cpu_seconds)


@dataclass(frozen=True)
class State:
    """cache.json: checked whole when it is read (records.from_json: each field's type; here:
    each count's range), so that a malformed one is refused in one line naming the field."""

    identity: dict[str, Any]
    rows: int
    bytes: int
    cost: Cost = Cost()
    format: int = 1  # none recorded: an earlier tfm's, checked before use

    def __post_init__(self) -> None:
        counts = {"rows": self.rows, "bytes": self.bytes}
        spent = {"cost.seconds": self.cost.seconds, "cost.cpu_seconds": self.cost.cpu_seconds}
        for name, value in {**counts, **spent}.items():
            if not (math.isfinite(value) and value >= 0):
                raise RecordError(f"{STATE}: {name} must be a finite number >= 0 (got {value})")


def cache_folder(root: Path, kind: str, identity: dict[str, Any]) -> Path:
    digest = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:16]
    return root / f"{kind}-{digest}"


class KeyIndex:
    """The rows of a fixed array of keys, found by key: sorted once, then looked up by binary
    search (`rows_of`), so that finding k keys among n costs k log n, not n."""

    def __init__(self, keys: np.ndarray):
        self.order = np.argsort(keys, kind="stable")
        self.sorted = keys[self.order]

    def rows_of(self, keys: np.ndarray) -> np.ndarray:
        """The rows holding any of `keys` (the array's keys are unique; one absent: no row)."""
        if not len(self.sorted) or not len(keys):
            return np.zeros(0, dtype=np.int64)
        positions = np.minimum(np.searchsorted(self.sorted, keys), len(self.sorted) - 1)
        rows: np.ndarray = self.order[positions[self.sorted[positions] == keys]]
        return rows


class TranslationCache:
    """The translations of one model and search (see the module docstring)."""

    def __init__(self, folder: Path, identity: dict[str, Any], check_stop: Callable[[], None] | None = None):
        self.folder, self.identity, self.check_stop = folder, identity, check_stop
        self.rows, self.bytes, self.cost = 0, 0, Cost()
        self._keys: np.ndarray = np.zeros(0, dtype=np.uint64)  # [rows] in row order
        self._sorted: np.ndarray = self._keys  # [rows] sorted, for `missing`
        self._order: np.ndarray | None = None  # argsort of _keys, made when first read
        self._claimed_at = 0  # the rows there were at this process's last `claim`
        self._claim: tuple[int, Path] | None = None  # this process's claim file, once it claims
        fd = use(folder, create=True)
        assert fd is not None
        self._in_use = weakref.finalize(self, let_go, fd, os.getpid())  # the share, held until `release`
        try:
            (folder / "claims").mkdir(exist_ok=True)
        except OSError as e:
            self._in_use()
            raise TfmError(f"cannot create the translation cache {folder}: {e.strerror}") from None
        with self._locked():
            self._open()

    @classmethod
    def existing(cls, folder: Path, check_stop: Callable[[], None] | None = None) -> TranslationCache | None:
        """The cache in `folder`, of the identity it records, when it is there (None when it is
        not: removed, pruned meanwhile, or its state unreadable); nothing is created."""
        fd = use(folder, create=False)
        if fd is None:
            return None
        try:  # (held: the folder cannot be pruned while this process reads it)
            try:
                identity = json.loads((folder / STATE).read_text(encoding="utf-8"))["identity"]
            except (OSError, ValueError, KeyError, TypeError):
                return None
            return cls(folder, identity, check_stop) if isinstance(identity, dict) else None
        finally:
            close_lock(fd)

    # -- reading -------------------------------------------------------------------------

    @property
    def keys(self) -> np.ndarray:
        """The keys of the complete rows, in row order."""
        return self._keys

    def missing(self, keys: np.ndarray) -> np.ndarray:
        """Which of `keys` have no translation yet, as far as this process has read (a bool
        per key; what others appended is read by `claim` and `append`)."""
        missing = np.ones(len(keys), dtype=bool)
        if not len(self._sorted):
            return missing
        for i in range(0, len(keys), CHECK_ROWS):  # a block at a time: its positions, not all
            block = keys[i : i + CHECK_ROWS]
            positions = np.minimum(np.searchsorted(self._sorted, block), len(self._sorted) - 1)
            missing[i : i + CHECK_ROWS] = self._sorted[positions] != block
        return missing

    def _set_keys(self, keys: np.ndarray) -> None:
        self._keys, self._sorted, self._order = keys, np.sort(keys), None

    def _add_keys(self, keys: np.ndarray) -> None:
        """Rows appended: their keys joined to the known ones (the new ones, sorted, inserted
        where they belong: one pass, one new array)."""
        self._keys = np.concatenate([self._keys, keys])
        new = np.sort(keys)
        self._sorted, self._order = np.insert(self._sorted, np.searchsorted(self._sorted, new), new), None

    def translations(self, keys: np.ndarray) -> Iterator[str]:
        """The translation of each of `keys`, in order (every one must be in the cache)."""
        if not len(keys):
            return
        if not self.rows:
            raise TfmError(f"{self.folder}: lines missing from the translation cache")
        if self._order is None:
            self._order = np.argsort(self.keys, kind="stable")
        sorted_keys = self._sorted  # the keys are unique: self.keys[self._order]
        ends = np.memmap(self.folder / "ends.u64", dtype=np.uint64, mode="r", shape=(self.rows,))
        with open(self.folder / "lines.txt", "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as text:
            for block in range(0, len(keys), 65536):
                wanted = keys[block : block + 65536]
                positions = np.minimum(np.searchsorted(sorted_keys, wanted), len(sorted_keys) - 1)
                if not (sorted_keys[positions] == wanted).all():
                    raise TfmError(f"{self.folder}: lines missing from the translation cache")
                rows = self._order[positions]
                stops = np.asarray(ends[rows], dtype=np.int64)
                starts = np.where(rows > 0, np.asarray(ends[np.maximum(rows - 1, 0)], dtype=np.int64), 0)
                for start, stop in zip(starts.tolist(), stops.tolist()):
                    yield text[start : stop - 1].decode("utf-8")

    # -- translating ---------------------------------------------------------------------

    def claim(self, wanted: np.ndarray, pending: np.ndarray, index: KeyIndex, size: int) -> np.ndarray:
        """The rows of `wanted` (the text's keys, `index` of them) to translate next: the first
        `size` rows still `pending` (updated here with what others translated) that no other
        live process has claimed; recorded as this process's claim. An empty array when every
        pending row is another process's (or none is left)."""
        with self._locked():
            seen = self._claimed_at
            self._read_new_rows()
            if self.rows < seen:  # emptied meanwhile (damaged): every line is pending again
                pending[:] = self.missing(wanted)
            else:  # the rows appended since the last claim, by any process
                pending[index.rows_of(self.keys[seen:])] = False
            self._claimed_at = self.rows
            free = pending.copy()
            free[index.rows_of(self._others_claims())] = False
            rows = np.flatnonzero(free)[:size]
            self._write_claim(wanted[rows])
        return rows

    def append(self, keys: np.ndarray, translations: list[str], cost: Cost | None = None) -> None:
        """Add the translations of the lines `keys` (one line each, no newline in them), and
        what making them cost; ends this process's claim. Keys another process added first are
        left out (its translation is kept: the same chunk, translated the same way)."""
        with self._locked():
            self._read_new_rows()
            new = self.missing(keys)
            keys = keys[new].astype(np.uint64)
            data = [t.encode("utf-8") + b"\n" for t, keep in zip(translations, new.tolist()) if keep]
            if len(keys):
                self._write_rows(keys, data, cost)
            self._write_claim(np.zeros(0, dtype=np.uint64))

    def close(self) -> None:
        """End this process's claim (its death does the same)."""
        if self._claim is not None:
            fd, path = self._claim
            self._claim = None
            with contextlib.suppress(OSError):
                path.unlink()
            close_lock(fd)

    def release(self) -> None:
        """Done with the cache: the claim ended and the folder's `.in-use` share let go (the
        object's end, or the process's, does the same); it may then be pruned."""
        self.close()
        self._in_use()

    # -- under the lock ------------------------------------------------------------------

    def _locked(self) -> contextlib.AbstractContextManager[None]:
        """`.lock` held for the block (waiting, and checking for a stop, while another has it)."""
        return exclusive_lock(self.folder / ".lock", self.check_stop)

    def _state(self) -> State | None:
        """cache.json, checked whole (None: there is none yet); a TfmError naming the folder
        when it cannot be read or is malformed, or is another model's or search's."""
        try:
            state = from_json(State, json.loads((self.folder / STATE).read_text(encoding="utf-8")), STATE)
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as e:  # (RecordError is a ValueError: a malformed field)
            raise TfmError(
                f"{self.folder / STATE}: unreadable ({e}); remove {self.folder} to translate again"
            ) from None
        if state.identity != self.identity:
            raise TfmError(f"{self.folder}: a translation cache of another model or search")
        return state

    def _open(self) -> None:
        """Read the state, cut the files back to it, and check that they agree (else empty
        the cache and say why)."""
        state = self._state()
        if state is None:
            self._reset()
            return
        rows, size = state.rows, state.bytes
        for name, length in (("keys.u64", 8 * rows), ("ends.u64", 8 * rows), ("lines.txt", size)):
            path = self.folder / name
            with open(path, "ab") as f:  # created if missing
                if f.tell() < length:
                    self._untrusted(f"{name} is shorter than {STATE} records")
                    return
                f.truncate(length)
        keys = np.fromfile(self.folder / "keys.u64", dtype=np.uint64)
        ordered = np.sort(keys)
        problem = self._disagreement(rows, size, ordered)
        if problem is not None:
            self._untrusted(problem)
            return
        if state.format == FORMAT:
            self.rows, self.bytes, self.cost = rows, size, state.cost
        else:  # an earlier tfm's, found sound: recorded as checked (and counted)
            self._write_state(rows, size, state.cost)
        self._keys, self._sorted, self._order = keys, ordered, None

    def _disagreement(self, rows: int, size: int, ordered: np.ndarray) -> str | None:
        """Why the files (already cut to the recorded lengths) do not hold `rows` lines of
        `size` bytes whose ends and keys are as recorded; None when they do. `ordered`: the
        keys sorted. Checked a block at a time, from memory maps: beside the keys, memory
        holds a block's worth."""
        if not rows:
            return None if size == 0 else f"{STATE} records bytes but no rows"
        if len(ordered) != rows or (ordered[1:] == ordered[:-1]).any():
            return "keys.u64 holds a key twice"
        ends = np.memmap(self.folder / "ends.u64", dtype=np.uint64, mode="r", shape=(rows,))
        if int(ends[-1]) != size or int(ends[0]) == 0:
            return "ends.u64 does not match lines.txt"
        with open(self.folder / "lines.txt", "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
            text = np.frombuffer(m, dtype=np.uint8)
            try:
                for i in range(0, rows, CHECK_ROWS):
                    block = np.asarray(ends[max(i - 1, 0) : i + CHECK_ROWS])  # from the end before it
                    if (block[1:] <= block[:-1]).any():
                        return "ends.u64 does not match lines.txt"
                    if (text[block - 1] != 10).any():
                        return "lines.txt's lines do not end where ends.u64 says"
                newlines = sum(
                    int(np.count_nonzero(text[i : i + CHECK_BLOCK] == 10)) for i in range(0, size, CHECK_BLOCK)
                )
                if newlines != rows:
                    return "lines.txt's lines do not end where ends.u64 says"
            finally:
                del text
        return None

    def _untrusted(self, problem: str) -> None:
        log.warning(
            "warning: the translation cache %s is damaged (%s): it is emptied and its lines will be translated again",
            self.folder,
            problem,
        )
        self._reset()

    def _reset(self) -> None:
        """An empty cache: the state that counts no row, then empty files."""
        self._write_state(0, 0, Cost())
        self._set_keys(np.zeros(0, dtype=np.uint64))
        for name in FILES:
            try:
                with open(self.folder / name, "wb"):
                    pass
            except OSError as e:
                raise TfmError(f"cannot write the translation cache file {self.folder / name}: {e.strerror}") from None

    def _write_state(self, rows: int, size: int, cost: Cost) -> None:
        """cache.json counting `rows` of `size` bytes; then this process counts them too."""
        atomic_write_json(
            self.folder / STATE,
            {
                "format": FORMAT,
                "identity": self.identity,
                "rows": rows,
                "bytes": size,
                "cost": {"seconds": round(cost.seconds, 3), "cpu_seconds": round(cost.cpu_seconds, 3)},
            },
        )
        self.rows, self.bytes, self.cost = rows, size, cost

    def _read_new_rows(self) -> np.ndarray:
        """Take in the rows appended by others since this process last read the state."""
        state = self._state()
        rows = state.rows if state else 0
        if rows < self.rows:  # emptied by another process as damaged: start over
            self._open()
            return self.keys
        if rows == self.rows:
            return np.zeros(0, dtype=np.uint64)
        assert state is not None
        new = np.fromfile(self.folder / "keys.u64", dtype=np.uint64, count=rows - self.rows, offset=8 * self.rows)
        self._add_keys(new)
        self.rows, self.bytes, self.cost = rows, state.bytes, state.cost
        return new

    def _write_rows(self, keys: np.ndarray, data: list[bytes], cost: Cost | None) -> None:
        """Append rows at the recorded end of each file (a dead writer's tail cut off first),
        flushed to disk before cache.json counts them. A failed write (disk full) is one line
        naming the file; the rows are not counted, and the next writer cuts them off."""
        ends = self.bytes + np.cumsum([len(d) for d in data], dtype=np.uint64)
        parts = [
            ("lines.txt", self.bytes, b"".join(data)),
            ("keys.u64", 8 * self.rows, keys.tobytes()),
            ("ends.u64", 8 * self.rows, ends.astype(np.uint64).tobytes()),
        ]
        for name, at, payload in parts:
            path = self.folder / name
            try:
                with open(path, "r+b") as f:
                    f.truncate(at)
                    f.seek(at)
                    f.write(payload)
                    f.flush()
                    os.fsync(f.fileno())
            except OSError as e:
                raise TfmError(f"cannot write the translation cache file {path}: {e.strerror or e}") from None
        total = self.cost if cost is None else self.cost + cost
        self._write_state(self.rows + len(keys), int(ends[-1]), total)
        self._add_keys(keys)

    def _write_claim(self, keys: np.ndarray) -> None:
        """This process's claim file holds `keys` (created and flock()ed on first use)."""
        path = self.folder / "claims" / f"{os.getpid()}-{uuid.uuid4().hex[:8]}.keys"
        try:
            if self._claim is None:
                fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
                track_lock(fd)
                fcntl.flock(fd, fcntl.LOCK_EX)
                self._claim = fd, path
            fd, path = self._claim
            os.ftruncate(fd, 0)
            os.pwrite(fd, keys.astype(np.uint64).tobytes(), 0)
        except OSError as e:
            raise TfmError(f"cannot write the translation cache file {path}: {e.strerror or e}") from None

    def _others_claims(self) -> np.ndarray:
        """The keys live processes other than this one are translating; the claim files of
        dead ones removed."""
        own = self._claim[1] if self._claim is not None else None
        claimed = [np.zeros(0, dtype=np.uint64)]
        for path in (self.folder / "claims").glob("*.keys"):
            if path == own:
                continue
            try:
                fd = os.open(path, os.O_RDONLY)
            except FileNotFoundError:
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:  # held: its process is alive
                claimed.append(np.fromfile(path, dtype=np.uint64))
            else:
                with contextlib.suppress(OSError):
                    path.unlink()
            finally:
                os.close(fd)
        return np.concatenate(claimed)
