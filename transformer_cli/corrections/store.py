"""The correction store: one append-only log, `<corrections.store>/corrections.jsonl`, that
`tfm serve`, `tfm feedback` and the Python API append to and training reads.

Each line is one JSON record, either a correction

    {"id", "time", "source", "corrected", "output", "client", "origin", "status", "reasons"}

(`status` "accepted" or "held", with the guards' `reasons`: corrections/guards.py), or a later
decision on one, {"id", "time", "decision": "accepted" | "rejected"} (`tfm feedback accept |
reject`). What a correction is now is the last word on it; a later accepted correction of the
same source replaces an earlier one.

An append is acknowledged only once it is on disk: written with O_APPEND under the store's lock
(`.lock`), then fsynced. A line cut short (a process killed while writing, a full disk) is never
read: readers take complete lines only, and the next writer cuts it off first. A full disk
leaves the log as it was and raises `StoreFull` naming the file.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..errors import TfmError, UsageError
from ..fsutil import append_whole_lines, exclusive_lock

LOG = "corrections.jsonl"
STATUSES = ("accepted", "held", "rejected")


class StoreFull(TfmError):
    """The store's disk is full: nothing was written."""


@dataclass
class Correction:
    """One corrected translation, as the store keeps it."""

    source: str
    corrected: str
    output: str | None = None  # what the model had answered, when the client says
    client: str | None = None
    origin: str = "api"  # serve, file, api
    id: str = field(default_factory=lambda: uuid.uuid4().hex[:16])
    time: float = field(default_factory=time.time)
    status: str = "accepted"
    reasons: list[str] = field(default_factory=list)


Check = Callable[[list[Correction], Correction], Correction]  # what is known, one new -> it, with its status


class CorrectionStore:
    """The log of one `corrections.store` folder (see the module docstring), and what this
    process has read of it (`refresh`)."""

    def __init__(self, folder: Path | str):
        self.folder = Path(folder)
        self.path = self.folder / LOG
        self._read = 0  # bytes of the log folded into _known
        self._known: dict[str, Correction] = {}
        self.version = 0  # how many times _known changed: a reader rebuilds what it made of it
        self._mutex = threading.Lock()  # _read, _known and version, between this process's threads

    def refresh(self) -> None:
        """Fold in what the log gained since the last read (a stat when nothing)."""
        with self._mutex:
            self._refresh()

    def _refresh(self) -> None:
        try:
            if os.stat(self.path).st_size == self._read:
                return
        except FileNotFoundError:
            return
        new = []
        for record, end in self.records(self._read):
            new.append(record)
            self._read = end
        if new:
            fold(iter(new), self._known)
            self.version += 1

    def corrections(self) -> list[Correction]:
        """Every correction with its current status, in the order they came."""
        with self._mutex:
            self._refresh()
            return list(self._known.values())

    def add(self, corrections: list[Correction], check: Check | None = None) -> list[Correction]:
        """Append `corrections` durably (all or none), each first given its status by `check`
        with every correction stored before it (under the lock: what other processes added
        counts too)."""
        with self._locked() as fd:
            with self._mutex:
                self._refresh()
                known = list(self._known.values())
            if check is not None:
                for c in corrections:
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
                self._write(fd, [{"id": i, "time": time.time(), "decision": decision} for i in ids])
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

    def records(self, start: int = 0) -> Iterator[tuple[dict[str, Any], int]]:
        """Each complete record from byte `start` on, with the byte offset after it."""
        try:
            with open(self.path, "rb") as f:
                f.seek(start)
                offset = start
                for line in f:
                    if not line.endswith(b"\n"):
                        return  # cut short: not (yet) a record
                    offset += len(line)
                    try:
                        record = json.loads(line)
                    except ValueError:
                        raise UsageError(f"{self.path}: byte {offset - len(line)}: not a JSON record") from None
                    yield record, offset
        except FileNotFoundError:
            return


def fold(records: Iterator[dict[str, Any]], found: dict[str, Correction]) -> None:
    """Log records into `found` (corrections by id), decisions applied."""
    for record in records:
        if "decision" in record:
            if record["id"] in found:
                found[record["id"]].status = record["decision"]
        else:
            known = {k: v for k, v in record.items() if k in Correction.__dataclass_fields__}
            found[record["id"]] = Correction(**known)
