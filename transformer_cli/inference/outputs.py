"""What translating takes and returns (no torch imported: `transformer_cli.api` imports it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from ..corrections.glossary import Term


@dataclass
class Translation:
    text: str
    tokens: list[int]
    score: float


@dataclass
class Sources:
    """Lines tokenized once for decoding (`TranslationBackend.encode`): what the search reads, and
    what a server counts against its token budget before it decodes them."""

    n_lines: int
    positions: list[int]  # indices of the non-empty lines: only they are decoded
    ids: list[Any]  # per non-empty line: its token ids, truncated, then <eos> (1-D tensors)
    truncated: list[tuple[int, int]]  # (line index, its length in tokens) of inputs cut to the limit
    terms: list[list[Term]] = field(default_factory=list)  # per non-empty line: the glossary's terms in it

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
        terms = (
            [line for p in parts for line in (p.terms or [[] for _ in p.ids])] if any(p.terms for p in parts) else []
        )
        return cls(n, positions, ids, truncated, terms)


@dataclass(frozen=True)
class TermUse:
    """What became of a glossary term found in a source: `model` (the translation had it
    already), `placed` (decoding again with the term as a constraint put it in), `unplaced` (it
    could not be put in: `why` says why)."""

    source: str
    target: str
    how: Literal["model", "placed", "unplaced"]
    why: str = ""

    def as_json(self) -> dict[str, str]:
        out = {"source": self.source, "target": self.target, "used": self.how}
        return out | ({"why": self.why} if self.why else {})


@dataclass
class Output:
    translations: list[list[Translation]]  # n-best, best first, per input line
    truncated: list[tuple[int, int]]  # (line index, its length in tokens) of inputs cut to the limit
    terms: list[list[TermUse]] = field(default_factory=list)  # per input line, when a glossary applied
