"""The correction store: one append-only log, `<corrections.store>/corrections.jsonl`, that
`tfm serve`, `tfm feedback` and the Python API append to and training reads.

Each line is one JSON record, either a correction

    {"id", "time", "source", "corrected", "output", "client", "origin", "status", "reasons", "caller"}

(`status` "accepted" or "held", with the guards' `reasons`: corrections/guards.py; `client` the
label its sender gave, `caller` who sent it as the limits count it), or a later decision on one,
{"id", "time", "decision": "accepted" | "rejected"} (`tfm feedback accept | reject`). What a
correction is now is the last word on it; a later accepted correction of the same source
replaces an earlier one.

An append is acknowledged only once it is on disk: written with O_APPEND under the store's lock
(`.lock`), then fsynced. A line cut short (a process killed while writing, a full disk) is never
read: readers take complete lines only, and the next writer cuts it off first. A full disk
leaves the log as it was and raises `StoreFull` naming the file.

Records are checked where they are read (`parse_record`), so every reader gets well-formed
records only. A line that holds none (not JSON: a hand edit's trailing comma; JSON of another
shape: no `corrected`, a number as `source`, a list) is skipped: a warning names the file and
line once, when this process first reads it, and `CorrectionStore.damaged` lists them. A log
changed other than by appending (a hand edit: another file, a shorter one, or the last line
read no longer where it was) is read again from its start.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import json
import logging
import math
import os
import pwd
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from ..errors import TfmError
from ..fsutil import append_whole_lines, exclusive_lock
from ..records import RecordError, from_json

LOG = "corrections.jsonl"
STATUSES = ("accepted", "held", "rejected")
DECISIONS = ("accepted", "rejected")
log = logging.getLogger("tfm")


class StoreFull(TfmError):
    """The store's disk is full: nothing was written."""


@dataclass
class Correction:
    """One corrected translation, as the store keeps it."""

    source: str
    corrected: str
    output: str | None = None  # what the model had answered, when the client says
    client: str | None = None  # the sender's label for itself: stored, never counted
    origin: str = "api"  # serve, file, api
    id: str = field(default_factory=lambda: uuid.uuid4().hex[:16])
    time: float = field(default_factory=time.time)
    status: str = "accepted"
    reasons: list[str] = field(default_factory=list)
    caller: str | None = None  # who sent it, as the limits count it (`local_caller`, serving's `caller`)


@dataclass
class Decision:
    """A later word on a stored correction (`tfm feedback accept | reject`)."""

    id: str
    time: float
    decision: str


@dataclass(frozen=True)
class DamagedLine:
    """A line of the log that holds no record, and why: skipped by every reader."""

    path: Path
    number: int
    why: str

    def __str__(self) -> str:
        return f"{self.path}:{self.number}: {self.why}"


Check = Callable[[list[Correction], Correction], Correction]  # what is known, one new -> it, with its status


@functools.cache  # a process's user does not change
def local_caller() -> str:
    """The caller of corrections added in this process without one (`tfm feedback add`, the
    Python API): the user running it, so a file's lines are one caller's, whatever clients they
    name."""
    try:
        return f"user {pwd.getpwuid(os.getuid()).pw_name}"
    except KeyError:  # a uid without a name (in a container)
        return f"user {os.getuid()}"


def parse_record(line: bytes) -> Correction | Decision:
    """One line of the log as its record; a RecordError says why it holds none."""
    raw = _json(line)
    if not isinstance(raw, dict):
        raise RecordError(f"not a JSON object ({type(raw).__name__})")
    if "decision" in raw:
        decision = from_json(Decision, raw, "a decision")
        _one_of("a decision: decision", decision.decision, DECISIONS)
        return decision
    if "id" not in raw:
        raise RecordError("a correction has no id")
    correction = from_json(Correction, raw, "a correction")
    _one_of("a correction: status", correction.status, STATUSES)
    if not math.isfinite(correction.time):
        raise RecordError("a correction: time is not a finite number")
    return correction


def _json(line: bytes) -> Any:
    try:
        return json.loads(line)
    except json.JSONDecodeError as e:
        raise RecordError(f"not JSON ({e.msg}, column {e.colno})") from None
    except UnicodeDecodeError as e:
        raise RecordError(f"not UTF-8 (byte {e.start + 1})") from None
    except RecursionError:
        raise RecordError("not JSON (nested too deeply)") from None


def _one_of(what: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise RecordError(f"{what} is {value!r}, not one of {', '.join(allowed)}")


def _apply(record: Correction | Decision, known: dict[str, Correction]) -> None:
    """A record into `known` (corrections by id): a correction as it is, a decision on one."""
    if isinstance(record, Correction):
        known[record.id] = record
    elif record.id in known:
        known[record.id].status = record.decision


class CorrectionStore:
    """The log of one `corrections.store` folder (see the module docstring), and what this
    process has read of it (`refresh`)."""

    def __init__(self, folder: Path | str):
        self.folder = Path(folder)
        self.path = self.folder / LOG
        self.version = 0  # how many times _known changed: a reader rebuilds what it made of it
        self._mutex = threading.Lock()  # what _forget sets and version, between this process's threads
        self._forget()

    def _forget(self) -> None:
        """Nothing of the log read (the next refresh reads it from its start)."""
        self._file: tuple[int, int] | None = None  # the log's (device, inode) when it was read
        self._read = 0  # bytes of the log folded into _known
        self._lines = 0  # the complete lines in them
        self._last = b""  # the last of those lines: still in place while the log only grows
        self._known: dict[str, Correction] = {}
        self._damaged: list[DamagedLine] = []

    def refresh(self) -> None:
        """Fold in what the log gained since the last read (a stat when nothing)."""
        with self._mutex:
            self._refresh()

    def _refresh(self) -> None:
        try:
            stat = os.stat(self.path)
            if (stat.st_dev, stat.st_ino) == self._file and stat.st_size == self._read:
                return
            with open(self.path, "rb") as f:
                self._read_on(f)
        except FileNotFoundError:
            return

    def _read_on(self, f: BinaryIO) -> None:
        """Fold in the log open at `f`: its new lines, or all of it when it was rewritten."""
        stat = os.fstat(f.fileno())
        rewritten = not self._grew(f, stat.st_dev, stat.st_ino, stat.st_size)
        if rewritten:
            self._forget()
        self._file = (stat.st_dev, stat.st_ino)
        if self._fold(f) or rewritten:
            self.version += 1

    def _grew(self, f: BinaryIO, device: int, inode: int, size: int) -> bool:
        """Whether the log open at `f` is the one read so far with lines appended, if any."""
        if not self._read:
            return True
        if (device, inode) != self._file or size < self._read:
            return False
        f.seek(self._read - len(self._last))
        return f.read(len(self._last)) == self._last

    def _fold(self, f: BinaryIO) -> bool:
        """Fold the complete lines after those read into _known, skipping and saying the damaged
        ones; whether any held a record."""
        f.seek(self._read)
        folded = False
        for line in f:
            if not line.endswith(b"\n"):
                break  # cut short: not (yet) a record
            self._read, self._lines, self._last = self._read + len(line), self._lines + 1, line
            try:
                record = parse_record(line)
            except RecordError as e:
                self._damaged.append(DamagedLine(self.path, self._lines, str(e)))
                log.warning("warning: %s; line skipped", self._damaged[-1])
                continue
            _apply(record, self._known)
            folded = True
        return folded

    def corrections(self) -> list[Correction]:
        """Every correction with its current status, in the order they came."""
        with self._mutex:
            self._refresh()
            return list(self._known.values())

    @property
    def damaged(self) -> list[DamagedLine]:
        """The lines read so far that hold no record (skipped), in order."""
        with self._mutex:
            return list(self._damaged)

    def add(self, corrections: list[Correction], check: Check | None = None) -> list[Correction]:
        """Append `corrections` durably (all or none), each first given its status by `check`
        with every correction stored before it (under the lock: what other processes added
        counts too); one without a caller is the local user's (`local_caller`)."""
        with self._locked() as fd:
            with self._mutex:
                self._refresh()
                known = list(self._known.values())
            for c in corrections:
                c.caller = c.caller or local_caller()
                if check is not None:
                    check(known, c)
                    known.append(c)
            self._write(fd, [asdict(c) for c in corrections])  # read back by the next refresh
        return corrections

    def decide(self, ids: list[str], decision: str) -> list[str]:
        """Record `decision` ("accepted" or "rejected") on the corrections `ids`; returns the ids
        the store does not hold (nothing is recorded then)."""
        with self._locked() as fd:
            self.refresh()
            with self._mutex:
                unknown = [i for i in ids if i not in self._known]
            if not unknown:
                self._write(fd, [asdict(Decision(i, time.time(), decision)) for i in ids])
        return unknown

    @contextlib.contextmanager
    def _locked(self) -> Iterator[int]:
        """The log open for appending under the store's lock."""
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            with exclusive_lock(self.folder / ".lock"):
                fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
                try:
                    yield fd
                finally:
                    os.close(fd)
        except OSError as e:
            raise self._error(e) from None

    def _write(self, fd: int, records: list[dict[str, Any]]) -> None:
        data = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records).encode("utf-8")
        try:
            append_whole_lines(fd, data)
        except OSError as e:
            raise self._error(e) from None

    def _error(self, e: OSError) -> TfmError:
        if e.errno == errno.ENOSPC:
            return StoreFull(f"cannot store corrections in {self.path}: no space left on device")
        return TfmError(f"cannot store corrections in {self.path}: {e.strerror or e}")
