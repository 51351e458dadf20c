"""Search strategies: how the next-token distributions become outputs. One seam for both
backends (torch's `search` over an incremental decoder, CTranslate2's `ct2_options`) and for
every place that names the decoding (validation records, evaluation reports).

    greedy   the most likely token at each step                     (decode.beam_size 1)
    beam     beam search, length-normalised, n-best                 (decode.beam_size > 1)
    sample   a token drawn from the top k of the distribution sharpened or flattened by a
             temperature; a seed repeats a draw (decode.strategy_options: SamplingOptions)

`decode.strategy: auto` picks greedy or beam by the beam size. Another strategy is a subclass
of `SearchStrategy` (contracts/strategy.py) registered in `SEARCH_STRATEGIES` (seams.py; from a
config's `plugins:` or the `tfm.search_strategies` entry point), with its own keys
(decode.strategy_options) as its `settings`; tests/inference/test_strategies.py and
tests/test_plugins.py add one from outside.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from ..config import DecodeConfig
from ..contracts.model import IncrementalDecoder, State
from ..contracts.strategy import Hypothesis, SearchStrategy
from ..seams import SEARCH_STRATEGIES
from .search import beam_search, greedy_search, sample_search
from .strategy_settings import SamplingOptions


class Greedy(SearchStrategy):
    name = "greedy"

    def search(
        self, model: IncrementalDecoder[State], src: Tensor, limits: Tensor, d: DecodeConfig
    ) -> list[list[Hypothesis]]:
        return [[h] for h in greedy_search(model, src, limits)]

    def ct2_options(self, d: DecodeConfig) -> dict[str, Any]:
        return {"beam_size": 1, "num_hypotheses": 1, "length_penalty": 1.0}  # per-token score, as tfm's


class Beam(SearchStrategy):
    name = "beam"

    def describe(self, d: DecodeConfig) -> str:
        return f"beam {d.beam_size}"

    def search(
        self, model: IncrementalDecoder[State], src: Tensor, limits: Tensor, d: DecodeConfig
    ) -> list[list[Hypothesis]]:
        return beam_search(model, src, limits, d.beam_size, d.length_penalty, d.n_best)

    def ct2_options(self, d: DecodeConfig) -> dict[str, Any]:
        return {"beam_size": d.beam_size, "num_hypotheses": d.n_best, "length_penalty": d.length_penalty}


class Sampling(SearchStrategy):
    name = "sample"

    def describe(self, d: DecodeConfig) -> str:
        own = self.own(d)
        return f"sampling (top-k {own.topk or 'all'}, temperature {own.temperature:g})"

    def search(
        self, model: IncrementalDecoder[State], src: Tensor, limits: Tensor, d: DecodeConfig
    ) -> list[list[Hypothesis]]:
        own = self.own(d)
        generator = torch.Generator(device=src.device)
        generator.manual_seed(own.seed if own.seed is not None else torch.seed())
        return [[h] for h in sample_search(model, src, limits, own.topk, own.temperature, generator)]

    def ct2_options(self, d: DecodeConfig) -> dict[str, Any]:
        own = self.own(d)
        return {
            "beam_size": 1,
            "num_hypotheses": 1,
            "length_penalty": 1.0,
            "sampling_topk": own.topk,
            "sampling_temperature": own.temperature,
        }

    def own(self, d: DecodeConfig) -> SamplingOptions:
        """Its settings, decode.strategy_options."""
        settings: SamplingOptions = SEARCH_STRATEGIES.options(self.name, d.strategy_options)
        return settings


GREEDY, BEAM, SAMPLING = Greedy(), Beam(), Sampling()  # seams.py names them


def strategy_for(d: DecodeConfig) -> SearchStrategy:
    """decode.strategy, or (auto) greedy for a beam of one and beam search for more."""
    return SEARCH_STRATEGIES[("greedy" if d.beam_size == 1 else "beam") if d.strategy == "auto" else d.strategy]
