"""What a search strategy is: `SearchStrategy`, one seams.SEARCH_STRATEGIES entry (how the
next-token distributions become outputs, for both backends: torch's `search` over an
incremental decoder, CTranslate2's `ct2_options`), and what it finds, `Hypothesis`. tfm's
strategies (greedy, beam, sample) are inference/strategies.py's; a plugin registers another.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from ..errors import UsageError
from .model import IncrementalDecoder, State

if TYPE_CHECKING:  # the contract names torch's tensors; importing it imports no torch
    from torch import Tensor

    from ..config_sections import DecodeConfig


@dataclass
class Hypothesis:
    """One output of a search, for one source."""

    tokens: list[int]  # without <sos> and <eos>
    log_prob: float  # sum over the output tokens, <eos> included
    score: float  # log_prob / length**length_penalty: what the beam ranks by


class SearchStrategy(ABC):
    """One way of decoding."""

    name: str
    # Its own keys: the dataclass decode.strategy_options is read with (None: it takes none);
    # `search` gets them as SEARCH_STRATEGIES.options(d.strategy, d.strategy_options).
    settings: ClassVar[type | None] = None

    def describe(self, d: DecodeConfig) -> str:
        """How records and logs name the decoding, e.g. "greedy", "beam 5"."""
        return self.name

    @abstractmethod
    def search(
        self, model: IncrementalDecoder[State], src: Tensor, limits: Tensor, d: DecodeConfig
    ) -> list[list[Hypothesis]]:
        """Each source's hypotheses, best first (torch)."""

    def ct2_options(self, d: DecodeConfig) -> dict[str, Any]:
        """ctranslate2.Translator.translate_batch's keyword arguments for the same decoding."""
        raise UsageError(
            f"decode.strategy: the {self.name} search has no CTranslate2 equivalent "
            "(translate with the torch checkpoint)"
        )
