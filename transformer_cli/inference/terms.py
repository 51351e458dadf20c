"""Terms at decode time: a source's glossary terms (corrections/glossary.py) checked against its
translation, and a translation that misses one decoded again with every term of the source as
a constraint (inference/constrained.py), so the model's own choice stands wherever it already
uses the terms and the constrained search, slower, runs only where it does not. What became of
each term is returned (`TermUse`): a term that cannot be placed is said, never dropped."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal

import torch

from ..contracts.tokenizer import Tokenizer
from ..corrections.glossary import Glossary, Term, read_glossary
from ..corrections.store_terms import StoreTerms
from ..errors import UsageError
from .outputs import Sources, TermUse, Translation

# Decode one source (ids ending in <eos>) with these target-side constraints (token ids each):
# the translation and, per constraint, why it is not in it ("": it is); None: the backend cannot.
Constrained = Callable[[torch.Tensor, list[list[int]]], tuple[Translation, list[str]] | None]


class Glossaries:
    """Glossary files read once, and again when they change (size or modification time), and
    corrections stores' terms kept up (corrections/store_terms.py), a store's over a file's."""

    def __init__(self) -> None:
        self._read: dict[str, tuple[tuple[int, int], Glossary]] = {}
        self._stores: dict[str, StoreTerms] = {}
        self._merged: tuple[Glossary | None, Glossary | None, Glossary | None] = (None, None, None)
        self._lock = threading.Lock()

    def get(self, path: str | None, store: str | None = None) -> Glossary | None:
        """The terms of the glossary file `path` (decode.glossary) and of the corrections store
        `store` (decode.glossary_store), the store's first (None: neither given)."""
        file = self._file(path)
        if store is None:
            return file
        with self._lock:
            terms = self._stores.setdefault(store, StoreTerms(store))
        stored = terms.glossary()
        if file is None:
            return stored
        with self._lock:
            if self._merged[:2] != (file, stored):
                self._merged = (file, stored, stored.over(file))
            return self._merged[2]

    def _file(self, path: str | None) -> Glossary | None:
        if path is None:
            return None
        try:
            stat = Path(path).stat()
        except OSError as e:
            raise UsageError(f"decode.glossary: {path}: {e.strerror or e}") from None
        stamp = (stat.st_mtime_ns, stat.st_size)
        with self._lock:
            known = self._read.get(path)
            if known is None or known[0] != stamp:
                known = (stamp, read_glossary(Path(path)))
                self._read[path] = known
            return known[1]


def terms_of(glossary: Glossary | None, lines: Sequence[str]) -> list[list[Term]]:
    """The terms each line holds ([] for all when there is no glossary, or no line holds one)."""
    if glossary is None or not len(glossary):
        return []
    found = [glossary.matches(line) for line in lines]
    return found if any(found) else []


def honour_terms(
    sources: Sources,
    results: list[list[Translation]],
    target: Tokenizer,
    constrained: Constrained,
) -> list[list[TermUse]]:
    """Check each translation in `results` (per input line, best first) against its source's
    terms, decoding again with constraints where one is missing (the best translation
    replaced in place); what became of each term, per input line."""
    uses: list[list[TermUse]] = [[] for _ in range(sources.n_lines)]
    for j, terms in enumerate(sources.terms):
        if not terms:
            continue
        line = sources.positions[j]
        before = results[line][0]
        had = [t.used_in(before.text) for t in terms]
        if all(had):
            uses[line] = [_use(t, "model") for t in terms]
            continue
        found = constrained(sources.ids[j], [target.encode_batch([t.target])[0] for t in terms])
        if found is None:
            uses[line] = [_kept(t, used, "this backend cannot place terms") for t, used in zip(terms, had)]
            continue
        translation, why = found
        results[line] = [translation]
        uses[line] = [
            _use(t, "unplaced", reason) if reason else _use(t, _how(used)) for t, used, reason in zip(terms, had, why)
        ]
    return uses


def _how(used_before: bool) -> Literal["model", "placed"]:
    return "model" if used_before else "placed"


def _kept(term: Term, used: bool, why: str) -> TermUse:
    return _use(term, "model") if used else _use(term, "unplaced", why)


def _use(term: Term, how: Literal["model", "placed", "unplaced"], why: str = "") -> TermUse:
    return TermUse(term.source, term.target, how, why, term.id)
