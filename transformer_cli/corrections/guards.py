"""What a correction must pass before it trains and is answered from memory: the guards of the
`corrections:` section. One that fails is kept as "held" with its reasons (`tfm feedback list
--held`, then `accept` or `reject`), never dropped:

    empty            a side without text
    length ratio     one side corrections.max_length_ratio times longer than the other
    copy             the corrected translation is the source itself
    source language  the correction shares more of its letter trigrams with the source than
                     with the output it corrects: the source's language, typed or pasted
                     into the wrong field (corrections.same_language)
    script           the correction is mostly written in another script than the output it
                     corrects (corrections.same_script)
    unknown tokens   more than corrections.max_unk_rate of its tokens are <unk> to the model
    repeated         the correction in force for the source (its latest accepted one:
                     state.py's `Fold.in_force`) is this one already; one that a later correction replaced
                     is accepted again, and is in force once more
    caller's cap     its caller already has corrections.per_client_per_day accepted today
                     (UTC): who sent it (store.py's `caller`: a network address, a local
                     user), not the `client` it names, a label that counts for nothing

A term (a glossary entry: source term, target term; docs/terms.md) passes guards of its own
(`Guards(..., terms=True)`): a side without a word, a side of more than TERM_WORDS words (a
sentence: post it as a correction), unknown tokens, repeated (the term in force for its source
words, `glossary.term_key`, has this target already) and the caller's cap (its terms counted
apart from its corrections). A term equal to its source is a name kept as it is: not held.
"""

from __future__ import annotations

import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable

from ..config_corrections import CorrectionsConfig
from .glossary import term_key, words
from .state import DAY_S as DAY_S  # re-exported: what the cap's days are
from .state import Fold, Pending, caller_day, normalised
from .store import Check, Correction

UnknownShare = Callable[[str], float]  # a text -> the share of its tokens that are <unk>
OVER_CAP = "corrections of the day are accepted already"  # the end of the cap's reason
EMPTY = "a side without text"
Known = Fold | Pending  # what the guards count a correction against
TERM_WORDS = 8  # the most words a side of a term may have


def script(text: str) -> str | None:
    """The script most of `text`'s letters are written in (LATIN, CYRILLIC, CJK, ...)."""
    counts = Counter(unicodedata.name(c, "?").split(" ")[0] for c in text if c.isalpha())
    return counts.most_common(1)[0][0] if counts else None


def trigrams(text: str) -> set[str]:
    """The letter trigrams of `text`, lowercased, words padded with a space (digits and
    punctuation left out): what two texts of one language share more of."""
    letters = "".join(c for c in unicodedata.normalize("NFC", text).lower() if c.isalpha() or c.isspace())
    padded = f" {' '.join(letters.split())} "
    return {padded[i : i + 3] for i in range(len(padded) - 2)}


def shared(text: str, other: str) -> float:
    """The share of `text`'s letter trigrams that `other` has too (0 for a text without letters)."""
    mine = trigrams(text)
    return len(mine & trigrams(other)) / len(mine) if mine else 0.0


class Guards:
    """The guards of one store (see the module docstring): `check` gives a correction its
    status and reasons, and an accepted one counts for the next. They read what is known
    (`Known`: the store's fold, so a check is O(1) however many corrections the store holds),
    or fold the corrections given from nothing."""

    def __init__(
        self,
        cfg: CorrectionsConfig,
        known: Iterable[Correction] | Known,
        unknown_share: UnknownShare | None,
        terms: bool = False,
    ):
        self.cfg, self.unknown_share, self.terms = cfg, unknown_share, terms
        self.known = known if isinstance(known, (Fold, Pending)) else Fold.of(known, term_key if terms else normalised)

    def reasons(self, c: Correction) -> list[str]:
        """Why `c` is held (empty: it passes)."""
        source, corrected = normalised(c.source), normalised(c.corrected)
        if self.terms:
            out = self._term_reasons(source, corrected)
        else:
            out = self._sentence_reasons(c, source, corrected)
        if out[:1] == [EMPTY]:
            return out
        if self.unknown_share is not None and (share := self.unknown_share(corrected)) > self.cfg.max_unk_rate:
            out.append(f"{share:.0%} of its tokens are unknown to the model")
        in_force = self.known.in_force(self.known.key(c.source))
        if in_force is not None and normalised(in_force.corrected) == corrected:
            out.append("already accepted")
        if self.known.accepted_on(*caller_day(c)) >= self.cfg.per_client_per_day:
            out.append(f"the caller's {self.cfg.per_client_per_day} {OVER_CAP}")
        return out

    def _sentence_reasons(self, c: Correction, source: str, corrected: str) -> list[str]:
        cfg = self.cfg
        if not source or not corrected:
            return [EMPTY]
        out = []
        if max(len(source), len(corrected)) > cfg.max_length_ratio * min(len(source), len(corrected)):
            out.append(f"one side is over {cfg.max_length_ratio:g} times longer than the other")
        if corrected == source:
            out.append("the correction is the source itself")
        elif cfg.same_language and c.output and shared(corrected, source) > shared(corrected, c.output):
            out.append("it reads more like the source than like the output it corrects (the source's language?)")
        if cfg.same_script and c.output and script(c.output) and script(corrected) != script(c.output):
            out.append(f"written in {script(corrected)}, the output it corrects in {script(c.output)}")
        return out

    @staticmethod
    def _term_reasons(source: str, target: str) -> list[str]:
        if not words(source) or not words(target):
            return [EMPTY]
        longest = max(len(words(source)), len(words(target)))
        if longest > TERM_WORDS:
            return [f"a side of {longest} words: a term has at most {TERM_WORDS} (a sentence is a correction)"]
        return []

    def check(self, c: Correction) -> Correction:
        """`c` with its status: accepted (and counted), or held with its reasons."""
        c.reasons = self.reasons(c)
        c.status = "held" if c.reasons else "accepted"
        if not c.reasons:
            self.known.put(c)
        return c


def over_cap(c: Correction) -> bool:
    """Whether `c` was held for its caller's daily cap."""
    return any(r.endswith(OVER_CAP) for r in c.reasons)


def guarded(cfg: CorrectionsConfig, unknown_share: UnknownShare | None = None, terms: bool = False) -> Check:
    """The store's check (`CorrectionStore.add`): the guards over what the store knows (its
    fold and the corrections of the append before this one), or over a list of corrections;
    `terms`: a terms log's (store.py's `TERMS`)."""

    def check(known: Iterable[Correction] | Known, c: Correction) -> Correction:
        return Guards(cfg, known, unknown_share, terms).check(c)

    return check
