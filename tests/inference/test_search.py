"""Search correctness on toy models whose probabilities are set by hand, and on a Transformer."""

import math

import pytest
import torch
from reference_search import greedy_search_uncached

from transformer_cli.inference import search
from transformer_cli.inference.search import beam_search, greedy_search, output_limits
from transformer_cli.model.transformer import Seq2SeqTransformer
from transformer_cli.model.transformer_config import TransformerConfig
from transformer_cli.tokenizers.vocab import EOS, PAD, SOS, TFM_IDS


class TableState:
    """Decoder state of `TableModel`: the previous token of each row."""

    def __init__(self, last: torch.Tensor):
        self.last = last

    def reorder(self, index):
        return TableState(self.last.index_select(0, index))


class TableModel:
    """p(next | previous token) from a fixed table: a first-order toy 'language model'."""

    tgt_ids = TFM_IDS

    def __init__(self, table: dict[int, dict[int, float]], vocab: int = 8):
        self.logp = torch.full((vocab, vocab), float("-inf"))
        for prev, nxt in table.items():
            for tok, p in nxt.items():
                self.logp[prev, tok] = math.log(p)

    def start(self, src):
        return TableState(torch.full((src.size(0),), SOS))

    def step(self, tokens, state):
        return self.logp[tokens], TableState(tokens)


# Greedy takes 4 (p=.5), after which the mass is spread over 5/6/7: at best .5*.4 = .2.
# Beam keeps 5 (p=.4) whose continuation is certain: .4*1.0 = .4.
TRAP = {SOS: {4: 0.5, 5: 0.4, 6: 0.1}, 4: {5: 0.4, 6: 0.35, 7: 0.25}, 5: {EOS: 1.0}, 6: {EOS: 1.0}, 7: {EOS: 1.0}}


def test_beam_finds_a_better_hypothesis_than_greedy():
    model, src = TableModel(TRAP), torch.zeros(1, 3, dtype=torch.long)
    limits = torch.tensor([10])
    greedy = greedy_search(model, src, limits)[0]
    beam = beam_search(model, src, limits, beam_size=2, length_penalty=0.0)[0][0]
    assert greedy.tokens == [4, 5] and math.isclose(greedy.log_prob, math.log(0.5 * 0.4), rel_tol=1e-5)
    assert beam.tokens == [5] and math.isclose(beam.log_prob, math.log(0.4), rel_tol=1e-5)
    assert beam.log_prob > greedy.log_prob


def test_n_best_are_sorted_and_distinct():
    model, src = TableModel(TRAP), torch.zeros(1, 3, dtype=torch.long)
    hyps = beam_search(model, src, torch.tensor([10]), beam_size=3, length_penalty=0.0, n_best=3)[0]
    assert [h.tokens for h in hyps] == [[5], [4, 5], [4, 6]]
    assert hyps[0].score >= hyps[1].score >= hyps[2].score


def test_limit_forces_eos():
    loop = {SOS: {4: 1.0}, 4: {4: 0.9, EOS: 0.1}}
    model, src = TableModel(loop), torch.zeros(2, 3, dtype=torch.long)
    limits = torch.tensor([3, 1])
    assert [h.tokens for h in greedy_search(model, src, limits)] == [[4, 4], []]
    assert [h[0].tokens for h in beam_search(model, src, limits, beam_size=3)] == [[4, 4], []]


def test_output_limits():
    assert output_limits(torch.tensor([0, 10, 100]), 1.5, 10, cap=99).tolist() == [10, 25, 99]


@pytest.fixture(scope="module")
def transformer():
    torch.manual_seed(1)
    cfg = TransformerConfig(
        d_model=32, n_heads=4, n_encoder_layers=2, n_decoder_layers=2, d_ff=64, dropout=0.0, max_len=64
    )
    model = Seq2SeqTransformer(cfg, 30, 30).eval()
    with torch.no_grad():  # a peaked output layer gives long, varied outputs
        model.generator.weight.mul_(4.0)
    g = torch.Generator().manual_seed(0)
    src = torch.randint(4, 30, (6, 9), generator=g)
    src[1, 5:], src[4, 3:] = PAD, PAD
    src[:, -1] = torch.where(src[:, -1] == PAD, PAD, torch.tensor(EOS))
    return model, src


def test_cached_batched_greedy_equals_uncached(transformer):
    model, src = transformer
    limits = output_limits((src != PAD).sum(1), 1.5, 5, cap=63)
    cached = greedy_search(model, src, limits)
    naive = greedy_search_uncached(model, src, limits)
    assert [h.tokens for h in cached] == [h.tokens for h in naive]
    assert any(len(h.tokens) > 3 for h in cached)
    for a, b in zip(cached, naive):
        assert math.isclose(a.log_prob, b.log_prob, rel_tol=1e-4, abs_tol=1e-4)
    assert not hasattr(search, "greedy_search_uncached")  # the reference loop is the tests' (reference_search.py)


def test_beam_size_one_equals_greedy(transformer):
    model, src = transformer
    limits = output_limits((src != PAD).sum(1), 1.5, 5, cap=63)
    greedy = greedy_search(model, src, limits)
    beam = beam_search(model, src, limits, beam_size=1)
    assert [h[0].tokens for h in beam] == [h.tokens for h in greedy]


def test_batched_beam_equals_one_sentence_at_a_time(transformer):
    model, src = transformer
    limits = output_limits((src != PAD).sum(1), 1.5, 5, cap=63)
    together = beam_search(model, src, limits, beam_size=4, n_best=2)
    for i in range(src.size(0)):
        alone = beam_search(model, src[i : i + 1], limits[i : i + 1], beam_size=4, n_best=2)[0]
        assert [h.tokens for h in alone] == [h.tokens for h in together[i]]
        assert all(math.isclose(a.score, b.score, rel_tol=1e-4) for a, b in zip(alone, together[i]))
