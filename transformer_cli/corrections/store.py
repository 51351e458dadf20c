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

What the records come to is folded as they are read (state.py), from the new ones alone. The
log is rewritten only by `compact` (`tfm feedback compact`): as its current records, atomically
(temp file, fsync, rename, under the lock), which readers see as another file.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import fcntl
import functools
import json
import logging
import math
import os
import pwd
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from ..errors import TfmError
from ..fsutil import append_whole_lines, atomic_write, close_lock, track_lock
from ..records import RecordError, from_json
from .correction import Correction as Correction  # re-exported: callers take it from the store
from .glossary import term_key
from .state import Fold, Pending, collector_paused, normalised

LOG = "corrections.jsonl"
TERMS = "terms.jsonl"  # the store's terms (docs/terms.md): records of the same shape, a term a correction
COMPACTED = "compacted.json"  # the last compaction: which log it replaced, and what it wrote
COMPACT_LEAST = 1000  # lines of a log below which `overgrown` never says so
PER_LOCK = 100  # corrections `add_batches` appends a hold of the store's lock: ~25 ms of guards
BULK_BYTES = 1 << 20  # a read of more of the log than this runs with the collector paused (state.py)
STATUSES = ("accepted", "held", "rejected")
DECISIONS = ("accepted", "rejected")
log = logging.getLogger("tfm")


class StoreFull(TfmError):
    """The store's disk is full: nothing was written."""


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
    line: bytes = field(default=b"", repr=False, compare=False)  # as it is: compaction keeps it

    def __str__(self) -> str:
        return f"{self.path}:{self.number}: {self.why}"


Check = Callable[[Pending, Correction], Correction]  # what is known, one new -> it, with its status


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
    correction = Correction(**_fields(raw)) if _plain(raw) else from_json(Correction, raw, "a correction")
    _one_of("a correction: status", correction.status, STATUSES)
    if not math.isfinite(correction.time):
        raise RecordError("a correction: time is not a finite number")
    return correction


FIELDS = tuple(f.name for f in dataclasses.fields(Correction))
TEXT, MAYBE_TEXT, NUMBER = (str,), (str, type(None)), (float, int)
PLAIN: dict[str, tuple[type, ...]] = {"source": TEXT, "corrected": TEXT, "id": TEXT, "origin": TEXT, "status": TEXT}
PLAIN |= {"time": NUMBER, "output": MAYBE_TEXT, "client": MAYBE_TEXT, "caller": MAYBE_TEXT, "reasons": (list,)}


def _plain(raw: dict[str, Any]) -> bool:
    """Whether `raw` holds a source, a correction and an id, and each field its plain JSON type
    (as the log's writers write them), checked directly: `from_json`'s general check (which says
    what is wrong) took most of a start's reading of 100,000 corrections."""
    for key, value in raw.items():
        allowed = PLAIN.get(key)
        if allowed is not None and type(value) not in allowed:
            return False
    reasons = raw.get("reasons")
    return "source" in raw and "corrected" in raw and (not reasons or all(type(r) is str for r in reasons))


def _fields(raw: dict[str, Any]) -> dict[str, Any]:
    """A plain record's fields (`_plain`), its time a float as `from_json` makes it."""
    values = {k: raw[k] for k in FIELDS if k in raw}
    if "time" in values:
        values["time"] = float(values["time"])
    return values


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


@contextlib.contextmanager
def _store_lock(path: Path) -> Iterator[None]:
    """An exclusive flock on `path`, waited for in the kernel rather than polled: a POST waiting
    for a file's batch (`add_batches`) gets the lock as soon as the batch lets go of it. Forked
    children close their copy (fsutil's `track_lock`)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    track_lock(fd)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        close_lock(fd)


class CorrectionStore:
    """The log of one `corrections.store` folder (see the module docstring), and what this
    process has read of it (`refresh`), folded (state.py's `Fold`)."""

    def __init__(self, folder: Path | str, name: str = LOG):
        self.folder = Path(folder)
        self.path = self.folder / name
        self.terms = name == TERMS  # source term, target term: keyed by the term's words
        self._key = term_key if self.terms else normalised
        self._note = self.folder / (COMPACTED if name == LOG else f"{self.path.stem}.{COMPACTED}")
        self._mutex = threading.Lock()  # reading the log into _state, between this process's threads
        self._state = Fold(self._key)
        self._start_over()

    def _start_over(self) -> None:
        """Nothing of the log read (the next read folds it from its start into a new state)."""
        self._file: tuple[int, int] | None = None  # the log's (device, inode) when it was read
        self._read = 0  # bytes of the log folded into _state
        self._lines = 0  # the complete lines in them
        self._last = b""  # the last of those lines: still in place while the log only grows
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
        """Fold in the log open at `f`: its new lines, or all of it when it was rewritten
        (compacted, edited), into a new state that replaces the old one once whole, so a
        lookup meanwhile (`in_force`, which takes no lock) answers from the old one."""
        stat = os.fstat(f.fileno())
        grew = self._grew(f, stat.st_dev, stat.st_ino, stat.st_size) or self._adopt(f, stat.st_dev, stat.st_ino)
        if not grew:
            self._start_over()
        state, old = (self._state, None) if grew else (Fold(self._key), self._state)
        with collector_paused() if stat.st_size - self._read > BULK_BYTES else contextlib.nullcontext():
            self._fold(f, state)
        self._state, self._file = state, (stat.st_dev, stat.st_ino)
        if old is not None:
            old.dismantle()

    def _grew(self, f: BinaryIO, device: int, inode: int, size: int) -> bool:
        """Whether the log open at `f` is the one read so far with lines appended, if any."""
        if not self._read:
            return True
        if (device, inode) != self._file or size < self._read:
            return False
        f.seek(self._read - len(self._last))
        return f.read(len(self._last)) == self._last

    def _adopt(self, f: BinaryIO, device: int, inode: int) -> bool:
        """Whether the log open at `f` is a compaction of all that was read (its note names the
        log and place this process read to, and its last line stands where the note says): then
        it is taken as read, the state kept, and only what came after the compaction is read."""
        try:
            note = json.loads(self._note.read_bytes())
            replaced, size, lines, last = note["replaced"], note["size"], note["lines"], bytes.fromhex(note["last"])
        except (OSError, ValueError, KeyError, TypeError):
            return False
        if not self._read or replaced != [*(self._file or (0, 0)), self._read, self._lines]:
            return False
        f.seek(max(0, size - len(last)))
        if size < len(last) or f.read(len(last)) != last:
            return False
        first = lines - len(self._damaged) + 1  # the damaged lines stand at the compacted log's end
        self._damaged = [dataclasses.replace(d, number=first + i) for i, d in enumerate(self._damaged)]
        self._file, self._read, self._lines, self._last = (device, inode), size, lines, last
        return True

    def _fold(self, f: BinaryIO, state: Fold) -> None:
        """Fold the complete lines after those read into `state`, skipping and saying the
        damaged ones."""
        f.seek(self._read)
        for line in f:
            if not line.endswith(b"\n"):
                break  # cut short: not (yet) a record
            self._read, self._lines, self._last = self._read + len(line), self._lines + 1, line
            try:
                record = parse_record(line)
            except RecordError as e:
                self._damaged.append(DamagedLine(self.path, self._lines, str(e), line))
                log.warning("warning: %s; line skipped", self._damaged[-1])
                continue
            if isinstance(record, Correction):
                state.put(record)
            else:
                state.decide(record.id, record.decision)

    def corrections(self) -> list[Correction]:
        """Every correction with its current status, in the order they came."""
        with self._mutex:
            self._refresh()
            return list(self._state.known.values())

    def current(self) -> dict[str, Correction]:
        """The correction in force for each normalised source, in the order they were accepted
        (state.py's `Fold.current`)."""
        with self._mutex:
            self._refresh()
            return self._state.current()

    def in_force(self, source: str) -> Correction | None:
        """The correction in force for a normalised source as of the last read (`refresh`). It
        takes no lock, so a server's event loop never waits on a thread reading the log: one
        dict lookup, of a state a re-read replaces whole."""
        return self._state.in_force(source)

    @property
    def fold(self) -> Fold:
        """What was read as of the last `refresh` (a re-read replaces it whole: see `_read_on`)."""
        return self._state

    @property
    def damaged(self) -> list[DamagedLine]:
        """The lines read so far that hold no record (skipped), in order."""
        with self._mutex:
            return list(self._damaged)

    def add(self, corrections: list[Correction], check: Check | None = None) -> list[Correction]:
        """Append `corrections` durably (all or none), each first given its status by `check`
        over what the store knows and the corrections before it (under the lock: what other
        processes added counts too); one without a caller is the local user's (`local_caller`)."""
        with self._locked() as fd:
            self.refresh()
            pending = Pending(self._state)  # nothing else changes it while the lock is held
            for c in corrections:
                c.caller = c.caller or local_caller()
                if check is not None:
                    check(pending, c)
            self._write(fd, [asdict(c) for c in corrections])  # read back by the next refresh
        return corrections

    def add_batches(self, corrections: list[Correction], check: Check | None = None) -> list[Correction]:
        """`add` a long list (a translator's file) PER_LOCK corrections at a time, letting go of
        the store's lock between batches, so a POST meanwhile waits for one batch, not the
        whole file. Each batch is all or none; a failure says how many the ones before stored."""
        for start in range(0, len(corrections), PER_LOCK):
            try:
                self.add(corrections[start : start + PER_LOCK], check)
            except TfmError as e:
                raise type(e)(f"{e} ({start} of the {len(corrections)} corrections were stored before it)") from None
        return corrections

    def decide(self, ids: list[str], decision: str) -> list[str]:
        """Record `decision` ("accepted" or "rejected") on the corrections `ids`; returns the ids
        the store does not hold (nothing is recorded then)."""
        with self._locked() as fd:
            self.refresh()
            unknown = [i for i in ids if i not in self._state.known]
            if not unknown:
                self._write(fd, [asdict(Decision(i, time.time(), decision)) for i in ids])
        return unknown

    def overgrown(self, over: float, least: int = COMPACT_LEAST) -> bool:
        """Whether the log, as last read, holds `over` times more lines than it would compacted
        (and `least` lines or more)."""
        with self._mutex:
            self._refresh()
            return self._lines >= least and self._lines >= over * (len(self._state.known) + len(self._damaged))

    def compact(self) -> tuple[int, int]:
        """Rewrite the log as its corrections with their current status (decisions folded in,
        a correction written again kept once), then the damaged lines as they are: written
        beside it, fsynced, renamed over it under the store's lock, so a process killed at any
        moment leaves the old log or the new one, each holding every acknowledged correction.
        Readers notice the new file (another inode) and read it from its start. Returns the
        log's lines before and after."""
        with self._locked():
            for stale in self.folder.glob(f".{self.path.name}.*.tmp"):  # a compaction's, killed before its rename
                stale.unlink(missing_ok=True)
            with self._mutex:
                self._refresh()
                before = self._lines
                return before, self._rewrite()

    def _rewrite(self) -> int:
        """`compact`'s new log (the store's lock and _mutex held), written a line at a time (a
        store's worth of JSON is never held at once), then this process's place in it as if it
        had read it: it holds what _state does, so this process reads none of it again. How
        many lines it has."""
        lines: list[dict[str, Any] | bytes] = [vars(c) for c in self._state.known.values()]
        lines += [d.line for d in self._damaged]
        replaced = [*(self._file or (0, 0)), self._read, self._lines]
        atomic_write(self.path, functools.partial(_write_lines, lines, self._note, replaced))
        stat = os.stat(self.path)
        last = lines[-1] if lines else b""
        self._last = last if isinstance(last, bytes) else _lines_of([last])
        self._file, self._read, self._lines = (stat.st_dev, stat.st_ino), stat.st_size, len(lines)
        first = len(lines) - len(self._damaged) + 1
        self._damaged = [dataclasses.replace(d, number=first + i) for i, d in enumerate(self._damaged)]
        return self._lines

    @contextlib.contextmanager
    def _locked(self) -> Iterator[int]:
        """The log open for appending under the store's lock."""
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            with _store_lock(self.folder / ".lock"):
                fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
                try:
                    yield fd
                finally:
                    os.close(fd)
        except OSError as e:
            raise self._error(e) from None

    def _write(self, fd: int, records: list[dict[str, Any]]) -> None:
        try:
            append_whole_lines(fd, _lines_of(records))
        except OSError as e:
            raise self._error(e) from None

    def _error(self, e: OSError) -> TfmError:
        if e.errno == errno.ENOSPC:
            return StoreFull(f"cannot store corrections in {self.path}: no space left on device")
        return TfmError(f"cannot store corrections in {self.path}: {e.strerror or e}")


def _write_lines(lines: list[dict[str, Any] | bytes], note: Path, replaced: list[int], f: BinaryIO) -> None:
    """Records (as the log's lines) and lines as they are, one after the other into `f` (a
    compaction's new log, not yet in place); then, before it takes the log's place, the `note`
    of what it replaces (`replaced`: the log's device, inode, bytes and lines as read) and what it
    holds (bytes, lines, its last line), by which a reader that had read all of the old log takes
    the new one as read (`CorrectionStore._adopt`) instead of reading it again."""
    size, last = 0, b""
    for line in lines:
        last = line if isinstance(line, bytes) else _lines_of([line])
        f.write(last)
        size += len(last)
    record = {"replaced": replaced, "size": size, "lines": len(lines), "last": last.hex()}
    atomic_write(note, functools.partial(_write_bytes, json.dumps(record).encode("utf-8")))


def _write_bytes(data: bytes, f: BinaryIO) -> None:
    f.write(data)


def _lines_of(records: list[dict[str, Any]]) -> bytes:
    """Records as the log's lines: one JSON object each, UTF-8."""
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records).encode("utf-8")
