"""contracts/strategy.py: SearchStrategy (SEARCH_STRATEGIES' entries: tfm's greedy, beam and
sample, or a plugin's) and Hypothesis, what a search finds: a strategy implements `search`, and
inherits its name as its description and a refusal of CTranslate2, which it may override."""

from __future__ import annotations

import pytest

from transformer_cli.config import DecodeConfig
from transformer_cli.contracts.strategy import Hypothesis, SearchStrategy
from transformer_cli.errors import UsageError
from transformer_cli.inference.strategies import BEAM, GREEDY, SAMPLING
from transformer_cli.seams import SEARCH_STRATEGIES


class Nothing(SearchStrategy):
    """Every sentence translated as nothing at all."""

    name = "nothing"

    def search(self, model, src, limits, d) -> list[list[Hypothesis]]:
        return [[Hypothesis([], 0.0, 0.0)] for _ in range(len(src))]


def test_a_strategy_inherits_its_name_as_its_description_and_no_ctranslate2_equivalent():
    d = DecodeConfig()
    strategy = Nothing()
    assert strategy.describe(d) == "nothing" and strategy.settings is None
    assert strategy.search(None, [[5, 3], [6, 3]], None, d) == [[Hypothesis([], 0.0, 0.0)]] * 2
    with pytest.raises(UsageError, match="decode.strategy: the nothing search has no CTranslate2 equivalent"):
        strategy.ct2_options(d)


def test_tfms_strategies_are_entries_of_the_contract():
    assert [SEARCH_STRATEGIES[name] for name in ("greedy", "beam", "sample")] == [GREEDY, BEAM, SAMPLING]
    assert all(isinstance(s, SearchStrategy) for s in (GREEDY, BEAM, SAMPLING))
    shape = SEARCH_STRATEGIES.shape
    assert shape is not None and shape.fault(Nothing()) == ""
    assert "not an instance of transformer_cli.contracts.strategy:SearchStrategy" in shape.fault(Nothing)
