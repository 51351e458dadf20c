"""Restoring the casing of source text typed without it.

A model trained on cased German meets `ein mann fährt fahrrad` from users: German capitalizes
nouns, so the lowercased sentence is, to the model, full of unknown spellings. `Truecaser`
learns each word's most frequent spelling in the training sources (sentence-initial words
excluded: their capital says nothing about the word) and gives a line that has no casing at
all (every letter lowercase, or every letter a capital) that spelling back before it is
tokenized, with a capital first letter as the training sentences have. Lines with any mix of
cases are left as typed. This is the frequency truecaser of the statistical MT pipelines
(e.g. Moses' truecase.perl), applied only where casing is missing.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping

WORD = re.compile(r"\w+")


def spelling_counts(lines: Iterable[str]) -> Counter[str]:
    """How often each word was seen as spelled, sentence-initial words excluded (their capital
    is positional). Counts of parts of a corpus add up (`Counter.update`) to those of the whole."""
    return Counter(itertools.chain.from_iterable(WORD.findall(line)[1:] for line in lines))


def has_no_casing(line: str) -> bool:
    """Whether `line` has letters and all of them are lowercase, or all of them capitals."""
    letters = [c for c in line if c.isalpha()]
    return len(letters) > 1 and (all(c.islower() for c in letters) or all(c.isupper() for c in letters))


class Truecaser:
    """Most frequent spelling per lowercased word, for words whose spelling is not lowercase."""

    def __init__(self, spellings: Mapping[str, str]):
        self.spellings = dict(spellings)

    @classmethod
    def fit(cls, lines: Iterable[str]) -> Truecaser:
        return cls.from_counts(spelling_counts(lines))

    @classmethod
    def from_counts(cls, counts: Counter[str]) -> Truecaser:
        """The truecaser of the lines `counts` was made from (see `spelling_counts`)."""
        forms: dict[str, dict[str, int]] = defaultdict(dict)  # lowercased -> spelling -> count
        for word, n in counts.items():
            forms[word.lower()][word] = n
        spellings = {}
        for key, seen in forms.items():
            best = max(seen.items(), key=lambda kv: (kv[1], kv[0] == key))[0]  # ties: lowercase
            if best != key:
                spellings[key] = best
        return cls(dict(sorted(spellings.items())))

    def recase(self, line: str) -> str:
        """`line` with its casing restored if it has none; otherwise `line` unchanged."""
        if not has_no_casing(line):
            return line
        restored = WORD.sub(lambda m: self.spellings.get(m.group(0), m.group(0)), line.lower())
        first = next((i for i, c in enumerate(restored) if c.isalpha()), None)
        if first is None:
            return restored
        return restored[:first] + restored[first].upper() + restored[first + 1 :]

    def state(self) -> dict[str, str]:
        return dict(self.spellings)

    @classmethod
    def from_state(cls, state: object) -> Truecaser:
        """Rebuild from `state()`; anything but a str -> str mapping is a ValueError."""
        if not isinstance(state, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in state.items()):
            raise ValueError("the source truecaser must map words to words")
        return cls(state)
