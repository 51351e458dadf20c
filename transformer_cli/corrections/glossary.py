"""A glossary: source terms and the target terms a translation must use for them ("Hund is
always dog, Leine is leash"), read from a TSV file, and the terms a sentence holds.

The rules, chosen to be predictable rather than clever:

- **Matching** is of word forms, not lemmas: a term matches where its words stand in the
  sentence as whole words (Unicode letters and digits; punctuation and spaces between words do
  not count), ignoring case (`Hund` matches `hund` and `HUND`). Inflected forms are entries of
  their own (`Hund`, `Hunde`, `Hundes`), as in a termbase. Where terms overlap, the longest
  wins, then the leftmost (`rote Leine` over `Leine`).
- **The target term** is written as given; a translation uses it when it holds its words as
  whole words, ignoring case (so a sentence-initial `Dog` uses `dog`).
- **A bad file** is refused whole, with one line naming the file and line: a line without
  exactly one tab between two non-empty fields (a third field, a note, is allowed), a term with
  no word in it, or one source term given two different targets (both lines named). A line
  starting with `#` and an empty line are skipped.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ..errors import UsageError

_WORD = re.compile(r"\w+")


def words(text: str) -> tuple[str, ...]:
    """The words of `text`, casefolded: what terms are matched by."""
    return tuple(w.casefold() for w in _WORD.findall(text))


def term_key(text: str) -> str:
    """What terms of one source share: its words, casefolded, one space apart (`Hund` and
    `HUND!` are one term; a store keeps the latest accepted target for each)."""
    return " ".join(words(text))


@dataclass(frozen=True)
class Term:
    """One entry: its source and target term, where it was given (file:line, or a store's term
    id), and its id when it is a store's."""

    source: str
    target: str
    where: str
    id: str = ""

    def used_in(self, translation: str) -> bool:
        """Whether `translation` holds the target term as whole words (any case)."""
        return _holds(words(translation), words(self.target))


def _holds(text: tuple[str, ...], part: tuple[str, ...]) -> bool:
    n = len(part)
    return any(text[i : i + n] == part for i in range(len(text) - n + 1))


class Glossary:
    """Terms by their source words (see the module docstring)."""

    def __init__(self, terms: Iterable[Term]):
        self.terms: list[Term] = []
        self._by_first: dict[str, list[tuple[tuple[str, ...], Term]]] = {}
        seen: dict[tuple[str, ...], Term] = {}
        for term in terms:
            key = words(term.source)
            if not key or not words(term.target):
                raise UsageError(f"{term.where}: a term needs a word on each side (got {term.source!r})")
            earlier = seen.get(key)
            if earlier is not None:
                if earlier.target != term.target:
                    raise UsageError(
                        f"{term.where}: {term.source!r} is {term.target!r} here but {earlier.target!r} "
                        f"at {earlier.where}: give one target"
                    )
                continue
            seen[key] = term
            self.terms.append(term)
            self._by_first.setdefault(key[0], []).append((key, term))
        for candidates in self._by_first.values():
            candidates.sort(key=lambda entry: -len(entry[0]))  # the longest first

    def __len__(self) -> int:
        return len(self.terms)

    def over(self, under: Glossary) -> Glossary:
        """These terms, and those of `under` whose source words none of these has (a store's
        terms over a file's: the store's word is the later one), `under`'s first: a term added
        to the store comes last (the training part appends it alone: glossary_part.py)."""
        mine = {words(t.source) for t in self.terms}
        return Glossary([*(t for t in under.terms if words(t.source) not in mine), *self.terms])

    def matches(self, sentence: str) -> list[Term]:
        """The terms `sentence` holds, in the order they stand, none overlapping another (the
        longest wins, then the leftmost)."""
        text = words(sentence)
        found: list[Term] = []
        i = 0
        while i < len(text):
            hit = next(
                ((key, term) for key, term in self._by_first.get(text[i], ()) if text[i : i + len(key)] == key),
                None,
            )
            if hit is None:
                i += 1
                continue
            found.append(hit[1])
            i += len(hit[0])
        return found


def read_glossary(path: Path) -> Glossary:
    """The glossary in the TSV file `path` (`source<TAB>target[<TAB>note]` a line); a bad line
    is a UsageError naming the file and line (see the module docstring)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"glossary {path}: cannot be read ({e})") from None
    terms = []
    for number, line in enumerate(text.split("\n"), start=1):
        line = line.removesuffix("\r")
        if not line.strip() or line.startswith("#"):
            continue
        fields = line.split("\t")
        if len(fields) not in (2, 3) or not fields[0].strip() or not fields[1].strip():
            raise UsageError(
                f"{path}:{number}: a glossary line is a source term, a tab and its target term "
                f"(and a note after another tab): got {line[:60]!r}"
            )
        terms.append(Term(fields[0].strip(), fields[1].strip(), f"{path}:{number}"))
    return Glossary(terms)
