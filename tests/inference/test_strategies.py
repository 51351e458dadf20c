"""The search-strategy seam: greedy, beam and sampling behind one interface for both backends,
named once for records, and open to a strategy added from outside the package."""

from __future__ import annotations

import dataclasses

import pytest
from helpers import sentence_pairs, untrained_checkpoint

from transformer_cli.api import open_backend
from transformer_cli.config import DecodeConfig
from transformer_cli.contracts.strategy import Hypothesis, SearchStrategy
from transformer_cli.errors import UsageError
from transformer_cli.inference.strategies import strategy_for
from transformer_cli.seams import SEARCH_STRATEGIES

LINES = [de for de, _ in sentence_pairs(30, seed=4)]


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    return untrained_checkpoint(tmp_path_factory.mktemp("s") / "m.pt")


def test_auto_is_greedy_for_one_beam_and_beam_search_for_more():
    assert strategy_for(DecodeConfig(beam_size=1)).describe(DecodeConfig(beam_size=1)) == "greedy"
    five = DecodeConfig(beam_size=5)
    assert strategy_for(five).describe(five) == "beam 5"
    sample = DecodeConfig(strategy="sample", strategy_options={"topk": 10, "temperature": 0.7})
    assert strategy_for(sample).describe(sample) == "sampling (top-k 10, temperature 0.7)"


def test_sampling_repeats_with_a_seed_and_a_top_k_of_one_is_greedy(model_path):
    greedy = [h[0].tokens for h in open_backend(model_path, "cpu", decode=DecodeConfig()).translate(LINES).translations]
    one = DecodeConfig(strategy="sample", strategy_options={"topk": 1})
    assert [h[0].tokens for h in open_backend(model_path, "cpu", decode=one).translate(LINES).translations] == greedy
    seeded = DecodeConfig(strategy="sample", strategy_options={"seed": 7, "temperature": 2.0})
    backend = open_backend(model_path, "cpu", decode=seeded)
    first, again = ([h[0].tokens for h in backend.translate(LINES).translations] for _ in range(2))
    assert first == again and first != greedy


class Shortest(SearchStrategy):
    """A toy from outside the package: every sentence translated as nothing at all."""

    name = "shortest"

    def search(self, model, src, limits, d) -> list[list[Hypothesis]]:
        return [[Hypothesis([], 0.0, 0.0)] for _ in range(src.size(0))]


def test_a_strategy_registered_from_outside_decodes_through_the_backend(model_path):
    SEARCH_STRATEGIES.register("shortest", Shortest())
    try:
        backend = open_backend(model_path, "cpu", decode=DecodeConfig(strategy="shortest"))
        assert [h[0].text for h in backend.translate(LINES[:3]).translations] == ["", "", ""]
    finally:
        SEARCH_STRATEGIES.unregister("shortest")
    with pytest.raises(UsageError, match=r"decode.strategy: unknown search strategy .shortest. \(known: beam, greedy"):
        open_backend(model_path, "cpu", decode=DecodeConfig(strategy="shortest")).translate(LINES[:1])


def test_ctranslate2_gets_the_same_strategy(model_path, tmp_path):
    pytest.importorskip("ctranslate2")
    from helpers import ct2_export

    ct2_export(model_path, tmp_path / "ct2")
    d = DecodeConfig(strategy="sample", strategy_options={"topk": 1})
    torch_out = open_backend(model_path, "cpu", decode=DecodeConfig()).translate(LINES).translations
    ct2_out = open_backend(tmp_path / "ct2", "cpu", decode=d).translate(LINES).translations
    assert [h[0].tokens for h in ct2_out] == [h[0].tokens for h in torch_out]  # top-1 sampling: greedy
    with pytest.raises(UsageError, match="decode.strategy: the shortest search has no CTranslate2 equivalent"):
        Shortest().ct2_options(dataclasses.replace(d, strategy="shortest"))
