"""A translation memory in front of the model: the accepted corrections of a store by their
normalised source (state.py's `normalised`), as the store's fold holds them (state.py): what
the log gained is folded in at the next `refresh`, so a correction one process accepts is
answered by every process serving from the same store at its next request, and a refresh costs
the new records alone (a rewritten log is read whole, into a state that replaces the old once
read: lookups meanwhile answer from the old one)."""

from __future__ import annotations

from dataclasses import dataclass

from .state import normalised
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
        self.refresh()

    def refresh(self) -> None:
        """Take in what the store's log gained, whoever read it (a stat when it gained nothing).
        A server runs it off its event loop: a rewritten log is read whole."""
        self.store.refresh()

    def lookup(self, source: str) -> Remembered | None:
        """The accepted correction in force for `source`, as of the last refresh. It takes no
        lock (`CorrectionStore.in_force`): an event loop may call it."""
        c = self.store.in_force(normalised(source))
        return None if c is None else Remembered(c.corrected, c.id)

    def __len__(self) -> int:
        return len(self.store.current())
