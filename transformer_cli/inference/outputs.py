"""What translating takes and returns (no torch imported: `transformer_cli.api` imports it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from ..corrections.correction import Correction
from ..corrections.glossary import Term


@dataclass
class Translation:
    text: str
    tokens: list[int]
    score: float


@dataclass(frozen=True)
class Example:
    """A pair close to a line, to decode it with (inference/near.py): an accepted correction."""

    source: str
    target: str
    id: str

    @classmethod
    def of(cls, c: Correction) -> Example:
        """An accepted correction as an example pair."""
        return cls(c.source, c.corrected, c.id)


@dataclass(frozen=True)
class NearSettings:
    """How a line's examples are mixed into its decoding (inference/near.py; the config's
    corrections.near_matches)."""

    neighbours: int = 8  # entries of the line's datastore each step reads
    temperature: float = 100.0  # of the softmax over their negative squared distances
    weight: float = 0.6  # the most the neighbours' distribution is given
    reach: float = 1000.0  # squared distance at which their share falls to 0
    doubt: float = 0.5  # their share times (1 - the model's top probability) ** doubt
    ahead: str | None = None  # a corrections store whose examples' keys are computed ahead (near_keys.py)


@dataclass(frozen=True)
class NearMatches:
    """Lines' near-matches (per non-empty line, in order) and how they are mixed in."""

    examples: list[list[Example]]
    settings: NearSettings


@dataclass
class Sources:
    """Lines tokenized once for decoding (`TranslationBackend.encode`): what the search reads, and
    what a server counts against its token budget before it decodes them."""

    n_lines: int
    positions: list[int]  # indices of the non-empty lines: only they are decoded
    ids: list[Any]  # per non-empty line: its token ids, truncated, then <eos> (1-D tensors)
    truncated: list[tuple[int, int]]  # (line index, its length in tokens) of inputs cut to the limit
    terms: list[list[Term]] = field(default_factory=list)  # per non-empty line: the glossary's terms in it
    examples: list[list[Example]] = field(default_factory=list)  # per non-empty line: pairs close to it
    near: NearSettings = NearSettings()  # how examples are used

    @property
    def tokens(self) -> int:
        """Source tokens to decode, `<eos>` not counted."""
        return sum(len(ids) - 1 for ids in self.ids)

    @classmethod
    def concat(cls, parts: list[Sources]) -> Sources:
        """The parts' lines one after the other, as if encoded together."""
        n, positions, ids, truncated = 0, [], [], []
        for p in parts:
            positions += [n + i for i in p.positions]
            ids += p.ids
            truncated += [(n + i, length) for i, length in p.truncated]
            n += p.n_lines
        terms = _per_line([p.terms for p in parts], [len(p.ids) for p in parts])
        examples = _per_line([p.examples for p in parts], [len(p.ids) for p in parts])
        return cls(n, positions, ids, truncated, terms, examples, parts[0].near if parts else NearSettings())


def _per_line(lists: list[list[list[Any]]], lines: list[int]) -> list[list[Any]]:
    """Parts' per-line lists, one after the other (a part without any: an empty list a line);
    [] when no part has any."""
    if not any(lists):
        return []
    return [line for found, n in zip(lists, lines) for line in (found or [[] for _ in range(n)])]


@dataclass(frozen=True)
class TermUse:
    """What became of a glossary term found in a source: `model` (the translation had it
    already), `placed` (decoding again with the term as a constraint put it in), `unplaced` (it
    could not be put in: `why` says why)."""

    source: str
    target: str
    how: Literal["model", "placed", "unplaced"]
    why: str = ""
    id: str = ""  # a corrections store's term: its id (docs/terms.md)

    def as_json(self) -> dict[str, str]:
        out = {"source": self.source, "target": self.target, "used": self.how}
        return out | ({"why": self.why} if self.why else {}) | ({"term": self.id} if self.id else {})


@dataclass
class Output:
    translations: list[list[Translation]]  # n-best, best first, per input line
    truncated: list[tuple[int, int]]  # (line index, its length in tokens) of inputs cut to the limit
    terms: list[list[TermUse]] = field(default_factory=list)  # per input line, when a glossary applied
    near: list[list[str]] = field(default_factory=list)  # per input line, when it had examples: those drawn on (ids)
