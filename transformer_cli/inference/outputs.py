"""What translating returns (plain data, no torch: `transformer_cli.api` imports it)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Translation:
    text: str
    tokens: list[int]
    score: float


@dataclass
class Output:
    translations: list[list[Translation]]  # n-best, best first, per input line
    truncated: list[tuple[int, int]]  # (line index, its length in tokens) of inputs cut to the limit
