"""Named entries of one kind: the open seams of tfm (model architectures, tokenizers, training
criteria, optimizers, schedules, augmentation transforms, search strategies).

A `Registry` maps a name, as configs spell it, to an entry. tfm registers its own entries
where they are defined; a user's module adds one with `register` (after importing tfm), and
an installed package announces its entries as Python entry points in the group `tfm.<kind>`
(`[project.entry-points."tfm.architectures"] mine = "my_pkg.models"`), imported the first
time a name is not found. An unknown name is a UsageError listing the known ones.
"""

from __future__ import annotations

from collections.abc import Iterator
from importlib import metadata
from typing import Generic, TypeVar

from .errors import UsageError

T = TypeVar("T")
_LOADED: set[str] = set()  # the kinds whose entry points were imported


def load_plugins(kind: str) -> None:
    """Import the modules installed packages announce for `kind` (group `tfm.<kind>`), once."""
    if kind in _LOADED:
        return
    _LOADED.add(kind)
    for point in metadata.entry_points(group=f"tfm.{kind}"):
        point.load()


class Registry(Generic[T]):
    """Entries of one `kind` (e.g. "architectures") by name; `what` names one in errors, and
    `key` the config key that chooses one (errors start with it)."""

    def __init__(self, kind: str, what: str, key: str = ""):
        self.kind, self.what, self.key = kind, what, key
        self._entries: dict[str, T] = {}

    def register(self, name: str, entry: T) -> T:
        """Add (or replace) the entry `name`; returns `entry`."""
        if not name or not isinstance(name, str):
            raise ValueError(f"a {self.what} needs a name (got {name!r})")
        self._entries[name] = entry
        return entry

    def unregister(self, name: str) -> None:
        """Remove the entry `name` (a test's, or a plugin's being replaced)."""
        self._entries.pop(name, None)

    def __getitem__(self, name: str) -> T:
        if name not in self._entries:
            load_plugins(self.kind)
        try:
            return self._entries[name]
        except KeyError:
            where = f"{self.key}: " if self.key else ""
            raise UsageError(f"{where}unknown {self.what} {name!r} (known: {', '.join(self.names())})"
                             ) from None

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def find(self, name: str) -> T | None:
        """The entry `name`, or None (installed packages' entries are looked at first)."""
        if name not in self._entries:
            load_plugins(self.kind)
        return self._entries.get(name)

    def names(self) -> list[str]:
        return sorted(self._entries)
