"""Lexically constrained beam search (Dynamic Beam Allocation) on toy models whose probabilities
are set by hand, and on randomly initialised Transformers."""

from __future__ import annotations

import math
import random

import pytest
import torch
from inference.test_search import TRAP, TableModel

from transformer_cli.inference.constrained import (
    _allocate,
    _Tracker,
    constrained_beam_search,
    unplaceable,
)
from transformer_cli.inference.search import beam_search, output_limits
from transformer_cli.model.transformer import Seq2SeqTransformer
from transformer_cli.model.transformer_config import TransformerConfig
from transformer_cli.tokenizers.vocab import EOS, PAD, SOS, TFM_IDS, UNK

VOCAB = 30


def tiny_transformer(seed: int, sentences: int = 8) -> tuple[Seq2SeqTransformer, torch.Tensor, torch.Tensor]:
    """A random Transformer (as tests/inference/test_search.py's), sources [sentences, 9] and
    their output limits [sentences]."""
    torch.manual_seed(seed)
    cfg = TransformerConfig(
        d_model=32, n_heads=4, n_encoder_layers=2, n_decoder_layers=2, d_ff=64, dropout=0.0, max_len=64
    )
    model = Seq2SeqTransformer(cfg, VOCAB, VOCAB).eval()
    with torch.no_grad():  # a peaked output layer gives long, varied outputs
        model.generator.weight.mul_(4.0)
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(4, VOCAB, (sentences, 9), generator=g)
    src[1, 5:] = PAD
    src[:, -1] = torch.where(src[:, -1] == PAD, PAD, torch.tensor(EOS))
    return model, src, output_limits((src != PAD).sum(1), 1.5, 5, cap=63)


def contains(tokens: list[int], c: list[int]) -> bool:
    return any(tokens[i : i + len(c)] == c for i in range(len(tokens) - len(c) + 1))


@pytest.fixture(scope="module")
def transformer():
    return tiny_transformer(1)


@pytest.mark.parametrize(("beam_size", "length_penalty"), [(1, 1.0), (3, 0.0), (5, 1.0)])
def test_without_constraints_it_is_beam_search(transformer, beam_size, length_penalty):
    model, src, limits = transformer
    for i in range(src.size(0)):
        one, limit = src[i : i + 1], limits[i : i + 1]
        plain = beam_search(model, one, limit, beam_size, length_penalty)[0][0]
        result = constrained_beam_search(model, one, limit, [], beam_size, length_penalty)
        assert result.hypothesis == plain
        assert result.placed == result.not_placed == result.unplaceable == []


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_constraint_appears_contiguously(seed):
    model, src, limits = tiny_transformer(seed)
    rng = random.Random(seed)
    for i in range(src.size(0)):
        for n_constraints in (1, 2, 3):
            constraints = [[rng.randrange(4, VOCAB) for _ in range(rng.randint(1, 3))] for _ in range(n_constraints)]
            result = constrained_beam_search(model, src[i : i + 1], limits[i : i + 1], constraints, beam_size=5)
            out = result.hypothesis.tokens
            assert all(contains(out, c) for c in constraints), (constraints, out)
            assert result.placed == list(range(n_constraints)) and result.not_placed == []
            assert len(out) + 1 <= int(limits[i])


def test_constraints_take_less_likely_paths():
    model, src, limits = TableModel(TRAP), torch.zeros(1, 3, dtype=torch.long), torch.tensor([10])
    # Unconstrained, beam 2 finds [5] (p .4); 7 only follows 4, and [4, 6] (.175) beats [6] (.1).
    assert constrained_beam_search(model, src, limits, [[7]], 2, 0.0).hypothesis.tokens == [4, 7]
    found = constrained_beam_search(model, src, limits, [[6]], 2, 0.0).hypothesis
    assert found.tokens == [4, 6] and math.isclose(found.log_prob, math.log(0.5 * 0.35), rel_tol=1e-5)


def test_constraints_the_output_already_has_leave_it_as_it_is():
    model, src, limits = TableModel(TRAP), torch.zeros(1, 3, dtype=torch.long), torch.tensor([10])
    plain = beam_search(model, src, limits, 2, 0.0)[0][0]
    assert plain.tokens == [5]
    assert constrained_beam_search(model, src, limits, [[5]], 2, 0.0).hypothesis == plain
    loop = {SOS: {4: 0.7, 5: 0.3}, 4: {4: 0.3, 5: 0.5, EOS: 0.2}, 5: {4: 0.3, 5: 0.1, EOS: 0.6}}
    model = TableModel(loop)
    plain = beam_search(model, src, limits, 3)[0][0]
    assert plain.tokens == [4, 5]
    for constraints in ([[4]], [[5]], [[4, 5]], [[4], [5]], [[5], [4, 5]]):
        assert constrained_beam_search(model, src, limits, constraints, 3).hypothesis == plain


def test_a_constraint_longer_than_the_limit_is_unplaceable(transformer):
    model, src, limits = transformer
    one, limit = src[:1], limits[:1]
    too_long = list(range(4, 4 + int(limit)))  # the limit counts <eos>: room for limit - 1 tokens
    assert unplaceable([[5], too_long, [6, UNK]], int(limit), TFM_IDS) == [1, 2]
    result = constrained_beam_search(model, one, limit, [[5], too_long, [6, UNK]], 5)
    assert result.unplaceable == [1, 2] and result.not_placed == [1, 2] and result.placed == [0]
    assert contains(result.hypothesis.tokens, [5])
    alone = constrained_beam_search(model, one, limit, [too_long], 5)
    assert alone.hypothesis == beam_search(model, one, limit, 5)[0][0]  # nothing left to search for
    assert alone.unplaceable == alone.not_placed == [0]


def test_constraints_that_do_not_fit_together_are_reported(transformer):
    model, src, limits = transformer
    one, limit = src[:1], torch.tensor([6])  # room for 5 tokens
    constraints = [[7, 8, 9], [10, 11, 12], [13]]
    result = constrained_beam_search(model, one, limit, constraints, 5)
    assert result.unplaceable == []
    assert len(result.placed) == 2 and sorted(result.placed + result.not_placed) == [0, 1, 2]
    assert len(result.hypothesis.tokens) == 5  # the best of what the limit allowed, still returned
    assert all(contains(result.hypothesis.tokens, constraints[i]) for i in result.placed)
    assert not any(contains(result.hypothesis.tokens, constraints[i]) for i in result.not_placed)


def test_it_is_deterministic():
    model, src, limits = tiny_transformer(3)
    constraints = [[9, 10], [11], [12, 13, 14]]
    for i in range(src.size(0)):
        runs = [constrained_beam_search(model, src[i : i + 1], limits[i : i + 1], constraints, 5) for _ in range(2)]
        assert runs[0] == runs[1]


def test_it_takes_one_sentence_and_non_empty_constraints(transformer):
    model, src, limits = transformer
    with pytest.raises(ValueError, match="one sentence"):
        constrained_beam_search(model, src[:2], limits[:2], [[5]], 5)
    with pytest.raises(ValueError, match="one token or more"):
        constrained_beam_search(model, src[:1], limits[:1], [[5], []], 5)


def test_progress_falls_back_to_the_longest_prefix_still_matching():
    tracker = _Tracker([(4, 4, 5), (5, 6)])
    progress = tracker.start()
    steps = []
    for token in (4, 4, 4, 5, 7, 5):
        progress = tracker.advance(progress, token)
        steps.append((progress, tracker.bank(progress), tracker.wanted(progress)))
    assert steps == [
        ((1, 0), 1, [4, 5]),
        ((2, 0), 2, [5]),
        ((2, 0), 2, [5]),  # 4 4 4: the last two still begin (4, 4, 5)
        ((3, 1), 4, [6]),  # (4, 4, 5) met, and its 5 begins (5, 6)
        ((3, 0), 3, [5]),
        ((3, 1), 4, [6]),
    ]
    assert tracker.met((3, 1)) == [0]


def test_allocation_shares_the_beam_across_banks():
    # 2 banks, beam 5: 2 places for bank 0, 3 for bank 1 (the remainder goes to the highest).
    assert _allocate([0, 0, 0, 1, 1, 1, 1], 2, 5) == [0, 1, 3, 4, 5]
    # Bank 1 has one candidate: its spare places pass down to bank 0.
    assert _allocate([0, 0, 0, 0, 1], 2, 5) == [0, 1, 2, 3, 4]
    # 4 banks, beam 3: one place each for banks 1-3; the empty bank 3's goes to bank 2.
    assert _allocate([0, 0, 1, 1, 2, 2], 4, 3) == [2, 4, 5]
    # Bank 0 cannot fill what reached it: the best candidates left take the places.
    assert _allocate([2, 2, 2, 0], 3, 3) == [0, 1, 3]
    # One bank (no constraints): the k best.
    assert _allocate([0] * 7, 1, 3) == [0, 1, 2]
