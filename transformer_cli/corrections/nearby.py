"""The accepted corrections whose sources are close to a line, not equal: what a near-match is
decoded with (inference/near.py), found by the words they share.

A source is its set of words (state.py's `normalised`, lower-cased, runs of letters and
digits). A line and a source are as close as the words they share weigh against all the
words either has, each word weighed by how rare it is among the sources in force (inverse
document frequency, idf(w) = ln(1 + N / df(w))):

    similarity = sum of idf over shared words / sum of idf over the words of either   (0..1)

so sharing "Hund" counts for more than sharing "ein", and a source equal to the line up to
case and punctuation scores 1. The index follows the store's fold (state.py) from the sources
whose accepted corrections changed since it last looked (`Fold.changed`): a correction costs
the words of its source, whatever the store holds; a fold read anew (a compacted or edited log)
is indexed whole. It is read and updated by one thread (the server's corrections reader).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from .correction import Correction
from .state import Fold, normalised

_WORD = re.compile(r"\w+")
LOOKED_UP = 4096  # a word held by more sources than this is not looked up (it is counted in full scores)
PRESELECTED = 64  # sources scored in full a line: those sharing most of its looked-up words


def words(text: str) -> frozenset[str]:
    """The words of `text` as sources are compared (the module docstring)."""
    return frozenset(_WORD.findall(normalised(text).lower()))


@dataclass(frozen=True)
class NearMatch:
    correction: Correction
    similarity: float


class NearbySources:
    """The words of the sources in force of one store's fold (the module docstring). Each source
    has a number for as long as the index lives; a word's sources are kept as a set of numbers,
    and as an array of them when a line asks (made again after the word's sources change), so a
    line's shared weights are summed by numpy, not a dictionary update a source."""

    def __init__(self) -> None:
        self._fold: Fold | None = None
        self._empty()

    def _empty(self) -> None:
        self._looked = 0  # entries of the fold's `changed` taken in
        self._of: dict[str, tuple[frozenset[str], Correction]] = {}  # normalised source -> words, correction
        self._number: dict[str, int] = {}  # normalised source -> its number
        self._sources: list[str] = []  # number -> normalised source
        self._time = np.zeros(0)  # number -> the time of its correction in force (0 once none is)
        self._length = np.zeros(0, dtype=np.int64)  # number -> how many words its source has
        self._holding: dict[str, set[int]] = {}  # word -> the numbers of the sources holding it
        self._arrays: dict[str, np.ndarray] = {}  # word -> those numbers as an array, made when asked

    def __len__(self) -> int:
        return len(self._of)

    def follow(self, fold: Fold) -> None:
        """Take in what changed in `fold` since the last look (all of it: a new fold)."""
        if fold is not self._fold:
            self._fold = fold
            self._empty()
            changed: list[str] = list(fold.current())
        else:
            changed = fold.changed[self._looked :]
        self._looked = len(fold.changed)
        for source in dict.fromkeys(changed):
            self._put(source, fold.in_force(source))

    def _put(self, source: str, c: Correction | None) -> None:
        number = self._number_of(source)
        old = self._of.pop(source, None)
        if old is not None:
            for w in old[0]:
                holders = self._holding[w]
                holders.discard(number)
                self._arrays.pop(w, None)
                if not holders:
                    del self._holding[w]
        self._time[number] = 0.0
        if c is not None:
            found = words(source)
            self._of[source] = (found, c)
            self._time[number], self._length[number] = c.time, len(found)
            for w in found:
                self._holding.setdefault(w, set()).add(number)
                self._arrays.pop(w, None)

    def _number_of(self, source: str) -> int:
        number = self._number.get(source)
        if number is None:
            number = self._number[source] = len(self._sources)
            self._sources.append(source)
            if number >= len(self._time):
                more = max(1024, len(self._time))
                self._time = np.concatenate([self._time, np.zeros(more)])
                self._length = np.concatenate([self._length, np.zeros(more, dtype=np.int64)])
        return number

    def _array(self, word: str) -> np.ndarray:
        found = self._arrays.get(word)
        if found is None:
            found = self._arrays[word] = np.fromiter(self._holding[word], dtype=np.int64)
        return found

    def _idf(self, word: str, n: int) -> float:
        """How rare `word` is among the `n` sources in force: ln(1 + n / its document frequency)."""
        return math.log1p(n / len(self._holding[word]))

    def near(self, line: str, k: int, least: float, after: float | None = None) -> list[NearMatch]:
        """The `k` corrections in force whose sources are closest to `line` with a similarity of
        at least `least` (closest first), its own source's excepted (the memory answers it), and
        those accepted at `after` or before (time.time(): those the model was trained on).

        The words the line shares with each source are summed from the sources holding each of
        its words, but for words held by more than LOOKED_UP sources (the commonest, which weigh
        least); the PRESELECTED sources sharing most are then scored in full."""
        asked, own = words(line), normalised(line)
        known = [w for w in asked if w in self._holding]
        n = len(self._of)
        idf = {w: self._idf(w, n) for w in known}
        looked = [w for w in known if len(self._holding[w]) <= LOOKED_UP]
        if not looked:
            return []
        arrays = [self._array(w) for w in looked]
        weights = np.repeat([idf[w] for w in looked], [len(a) for a in arrays])
        shared = np.bincount(np.concatenate(arrays), weights=weights, minlength=len(self._sources))
        if own in self._number:
            shared[self._number[own]] = 0.0
        if after is not None:
            shared[self._time[: len(shared)] <= after] = 0.0
        candidates = np.flatnonzero(shared)
        if not len(candidates):
            return []
        most = max(PRESELECTED, k)
        if (
            len(candidates) > most
        ):  # the `most` sharing most (ties: the shorter sources, with fewer words the line lacks)
            order = np.lexsort((candidates, self._length[candidates], -shared[candidates]))
            candidates = candidates[order[:most]]
        asked_weight = sum(idf.values()) + (len(asked) - len(known)) * math.log1p(n)  # unknown words: the rarest
        scored = []
        for number in candidates.tolist():
            found, c = self._of[self._sources[number]]
            both = sum(idf[w] for w in found & asked)
            others = sum(self._idf(w, n) for w in found - asked)
            similarity = both / (asked_weight + others)
            if similarity >= least:
                scored.append(NearMatch(c, similarity))
        scored.sort(key=lambda m: (-m.similarity, m.correction.id))
        return scored[:k]
