"""A translation memory in front of the model: the accepted corrections of a store by their
normalised source (corrections/guards.py's `normalised`), read again whenever the store's log
has grown, so a correction one process accepts is answered by every process serving from the
same store at its next request."""

from __future__ import annotations

from dataclasses import dataclass

from .guards import current, normalised
from .store import CorrectionStore


@dataclass(frozen=True)
class Remembered:
    """What the memory answers for a source."""

    translation: str
    id: str


class TranslationMemory:
    """The accepted corrections of `store`, by source (see the module docstring)."""

    def __init__(self, store: CorrectionStore):
        self.store = store
        self._by_source: dict[str, Remembered] = {}
        self._version = -1  # of the store's corrections that _by_source was made from
        self.refresh()

    def refresh(self) -> None:
        """Take in what the store's log gained, whoever read it (a stat when it gained nothing)."""
        self.store.refresh()
        if self.store.version != self._version:
            self._version = self.store.version
            self._by_source = {
                source: Remembered(c.corrected, c.id) for source, c in current(self.store.corrections()).items()
            }

    def lookup(self, source: str) -> Remembered | None:
        return self._by_source.get(normalised(source))

    def __len__(self) -> int:
        return len(self._by_source)
