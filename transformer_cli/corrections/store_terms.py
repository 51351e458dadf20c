"""A store's terms as a glossary: the accepted terms of `<corrections.store>/terms.jsonl`
(store.py's `TERMS`), the latest accepted target of each source term, kept up as the log grows:
a term one process accepts is used by every process translating with the store from its next
call. The glossary is made again only when the log's fold changed (a stat otherwise)."""

from __future__ import annotations

import threading
from pathlib import Path

from .glossary import Glossary, Term, words
from .state import Fold
from .store import TERMS, CorrectionStore


class StoreTerms:
    """The terms of the store at `folder` (see the module docstring)."""

    def __init__(self, folder: Path | str):
        self.store = CorrectionStore(folder, TERMS)
        self._lock = threading.Lock()  # the glossary made, between the threads that translate
        self._made: tuple[Fold | None, int, Glossary] = (None, -1, Glossary([]))

    def glossary(self) -> Glossary:
        """The store's accepted terms as they stand now (the log's new records taken in)."""
        with self._lock:
            self.store.refresh()
            fold = self.store.fold
            made_of, changes, glossary = self._made
            if made_of is not fold or changes != len(fold.changed):
                glossary = Glossary(_terms(fold))
                self._made = (fold, len(fold.changed), glossary)
            return glossary


def _terms(fold: Fold) -> list[Term]:
    """The terms in force in `fold`, as glossary entries (one without a word on a side, which
    the guards never accept but a hand edit may, is left out)."""
    return [
        Term(c.source, c.corrected, f"term {c.id}", c.id)
        for c in fold.current().values()
        if words(c.source) and words(c.corrected)
    ]
