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
                     `current`) is this one already; one that a later correction replaced
                     is accepted again, and is in force once more
    caller's cap     its caller already has corrections.per_client_per_day accepted today
                     (UTC): who sent it (store.py's `caller`: a network address, a local
                     user), not the `client` it names, a label that counts for nothing
"""

from __future__ import annotations

import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable

from ..config_corrections import CorrectionsConfig
from .store import Check, Correction

UnknownShare = Callable[[str], float]  # a text -> the share of its tokens that are <unk>
DAY_S = 86_400
OVER_CAP = "corrections of the day are accepted already"  # the end of the cap's reason


def normalised(text: str) -> str:
    """`text` as sources are matched: Unicode NFC, spaces collapsed and trimmed."""
    return " ".join(unicodedata.normalize("NFC", text).split())


def current(corrections: Iterable[Correction]) -> dict[str, Correction]:
    """The correction in force for each normalised source: its latest accepted one (by time),
    in the order they were accepted (a source corrected again goes last)."""
    latest: dict[str, Correction] = {}
    for c in sorted(corrections, key=lambda c: c.time):
        if c.status == "accepted":
            latest.pop(normalised(c.source), None)
            latest[normalised(c.source)] = c
    return latest


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


def _caller_day(c: Correction) -> tuple[str | None, int]:
    """What the daily cap counts `c` under: its caller and its day (UTC)."""
    return c.caller, int(c.time // DAY_S)


class Guards:
    """The guards of one store (see the module docstring): `check` gives a correction its
    status and reasons, counting what it accepts per caller and day."""

    def __init__(self, cfg: CorrectionsConfig, accepted: Iterable[Correction], unknown_share: UnknownShare | None):
        self.cfg, self.unknown_share = cfg, unknown_share
        accepted = list(accepted)
        self.in_force = {source: normalised(c.corrected) for source, c in current(accepted).items()}
        self.today: Counter[tuple[str | None, int]] = Counter()
        for c in accepted:
            self._count(c)

    def _count(self, c: Correction) -> None:
        self.today[_caller_day(c)] += 1

    def reasons(self, c: Correction) -> list[str]:
        """Why `c` is held (empty: it passes)."""
        cfg, source, corrected = self.cfg, normalised(c.source), normalised(c.corrected)
        if not source or not corrected:
            return ["a side without text"]
        out = []
        if max(len(source), len(corrected)) > cfg.max_length_ratio * min(len(source), len(corrected)):
            out.append(f"one side is over {cfg.max_length_ratio:g} times longer than the other")
        if corrected == source:
            out.append("the correction is the source itself")
        elif cfg.same_language and c.output and shared(corrected, source) > shared(corrected, c.output):
            out.append("it reads more like the source than like the output it corrects (the source's language?)")
        if cfg.same_script and c.output and script(c.output) and script(corrected) != script(c.output):
            out.append(f"written in {script(corrected)}, the output it corrects in {script(c.output)}")
        if self.unknown_share is not None and (share := self.unknown_share(corrected)) > cfg.max_unk_rate:
            out.append(f"{share:.0%} of its tokens are unknown to the model")
        if self.in_force.get(source) == corrected:
            out.append("already accepted")
        if self.today[_caller_day(c)] >= cfg.per_client_per_day:
            out.append(f"the caller's {cfg.per_client_per_day} {OVER_CAP}")
        return out

    def check(self, c: Correction) -> Correction:
        """`c` with its status: accepted (and counted), or held with its reasons."""
        c.reasons = self.reasons(c)
        c.status = "held" if c.reasons else "accepted"
        if not c.reasons:
            self._count(c)
            self.in_force[normalised(c.source)] = normalised(c.corrected)
        return c


def over_cap(c: Correction) -> bool:
    """Whether `c` was held for its caller's daily cap."""
    return any(r.endswith(OVER_CAP) for r in c.reasons)


def guarded(cfg: CorrectionsConfig, unknown_share: UnknownShare | None = None) -> Check:
    """The store's check (`CorrectionStore.add`): the guards over the corrections accepted so far."""

    def check(known: list[Correction], c: Correction) -> Correction:
        return Guards(cfg, [k for k in known if k.status == "accepted"], unknown_share).check(c)

    return check
