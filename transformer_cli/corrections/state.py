"""What a store's records come to, kept up as they are read (store.py's `refresh`): every
correction by id with its current status, the correction in force for each source (its latest
accepted one, by time), and how many corrections each caller had accepted each day (UTC).

One fold that the translation memory (memory.py), the guards (guards.py) and training
(training.py) all read, updated from the new records alone: a record costs O(1) (O(the
source's accepted corrections) when a decision takes back the one in force), so a server of a
store of 100,000 corrections takes in a POST without going over the other 99,999, and the
guards of a file of 10,000 lines are linear in it. `Fold.of(records)` folds them from nothing,
which the incremental state always equals (tests/corrections/test_state.py).

`Pending` is the corrections of one append over the store's fold, checked but not yet in the
log: each counts for the next one's guards, and the store's fold takes them in only when it
reads them back from the log, so a failed append leaves it as it was.
"""

from __future__ import annotations

import contextlib
import gc
import threading
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .correction import Correction

DAY_S = 86_400
ACCEPTED = "accepted"
_pauses = {"reads": 0, "was_enabled": False}  # collector_paused's reads in this process now
_pausing = threading.Lock()


def normalised(text: str) -> str:
    """`text` as sources are matched: Unicode NFC, spaces collapsed and trimmed."""
    return " ".join(unicodedata.normalize("NFC", text).split())


def caller_day(c: Correction) -> tuple[str | None, int]:
    """What the daily cap counts `c` under: its caller and its day (UTC)."""
    return c.caller, int(c.time // DAY_S)


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector paused for a read of much of a log, then what it built
    frozen (`gc.freeze`: left out of later full passes). A fold holds a few objects a
    correction, none in a cycle; without this, the collector's full passes over them, in
    whichever thread allocates, hold the GIL 0.1-0.3 s each at 100,000 corrections in a
    process with a model loaded, and every thread waits: a server's event loop too
    (tests/serving/test_corrections_loop.py)."""
    with _pausing:
        if not _pauses["reads"]:
            _pauses["was_enabled"] = gc.isenabled()
            gc.disable()
        _pauses["reads"] += 1
    try:
        yield
    finally:
        with _pausing:
            _pauses["reads"] -= 1
            if not _pauses["reads"] and _pauses["was_enabled"]:
                gc.freeze()
                gc.enable()


class Fold:
    """The state of a store's records (see the module docstring)."""

    def __init__(self, key: Callable[[str], str] = normalised) -> None:
        self.key = key  # a source -> what corrections of one source share (`normalised`; terms: glossary.term_key)
        self.known: dict[str, Correction] = {}  # every correction by id, in the order first seen
        self._place: dict[str, int] = {}  # id -> its place in that order: breaks ties of time
        self._accepted: dict[str, dict[str, Correction]] = {}  # a source's key -> its accepted, by id
        self._in_force: dict[str, Correction] = {}  # a source's key -> its latest accepted
        self._per_day: Counter[tuple[str | None, int]] = Counter()  # accepted by (caller, day)
        self.changed: list[str] = []  # keys of the sources whose accepted corrections changed, in order

    @classmethod
    def of(cls, corrections: Iterable[Correction], key: Callable[[str], str] = normalised) -> Fold:
        """The fold of `corrections` from nothing, in their order."""
        fold = cls(key)
        for c in corrections:
            fold.put(c)
        return fold

    def put(self, c: Correction) -> None:
        """A correction record: a new one, or one whose id is known again (it replaces that one,
        in its place)."""
        old = self.known.get(c.id)
        if old is not None:
            self._leave(old)
        else:
            self._place[c.id] = len(self._place)
        self.known[c.id] = c
        self._enter(c)

    def decide(self, id: str, status: str) -> None:
        """A decision record: the correction `id`, if known, has `status` from now on."""
        c = self.known.get(id)
        if c is not None:
            self._leave(c)
            c.status = status
            self._enter(c)

    def in_force(self, source: str) -> Correction | None:
        """The correction in force for a source's key (`key`; None: no accepted one)."""
        return self._in_force.get(source)

    def accepted_on(self, caller: str | None, day: int) -> int:
        """How many corrections `caller` had accepted on `day` (UTC days since the epoch)."""
        return self._per_day.get((caller, day), 0)

    def current(self) -> dict[str, Correction]:
        """The correction in force for each source's key, in the order they were accepted
        (by time; a source corrected again goes last)."""
        return dict(sorted(self._in_force.items(), key=lambda item: self._key(item[1])))

    def dismantle(self) -> None:
        """Empty the fold an entry at a time: freed in one go (its last reference dropped), a
        fold of 100,000 corrections holds the GIL some 50 ms, and every other thread waits (a
        server's event loop too); freed this way, other threads run in between."""
        for table in (self.known, self._place, self._accepted, self._in_force):
            while table:
                table.popitem()
        while self.changed:
            self.changed.pop()

    def _key(self, c: Correction) -> tuple[float, int]:
        return c.time, self._place[c.id]

    def _enter(self, c: Correction) -> None:
        if c.status != ACCEPTED:
            return
        self._per_day[caller_day(c)] += 1
        source = self.key(c.source)
        self.changed.append(source)
        self._accepted.setdefault(source, {})[c.id] = c
        now = self._in_force.get(source)
        if now is None or self._key(c) >= self._key(now):
            self._in_force[source] = c

    def _leave(self, c: Correction) -> None:
        if c.status != ACCEPTED:
            return
        self._per_day[caller_day(c)] -= 1
        if not self._per_day[caller_day(c)]:
            del self._per_day[caller_day(c)]
        source = self.key(c.source)
        self.changed.append(source)
        accepted = self._accepted[source]
        del accepted[c.id]
        if not accepted:
            del self._accepted[source], self._in_force[source]
        elif self._in_force[source] is c:
            self._in_force[source] = max(accepted.values(), key=self._key)


class Pending:
    """The corrections of one append over the store's fold (see the module docstring): they
    come after every correction the fold holds."""

    def __init__(self, base: Fold):
        self.base = base
        self.key = base.key
        self._new = Fold(base.key)

    def put(self, c: Correction) -> None:
        self._new.put(c)

    def in_force(self, source: str) -> Correction | None:
        new, old = self._new.in_force(source), self.base.in_force(source)
        return old if new is None or (old is not None and old.time > new.time) else new

    def accepted_on(self, caller: str | None, day: int) -> int:
        return self.base.accepted_on(caller, day) + self._new.accepted_on(caller, day)
