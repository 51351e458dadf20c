"""Decoding with near-matches (inference/near.py): a datastore of example pairs' decoder
states mixed into the model's next-token distribution, on randomly initialised Transformers."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from inference.test_constrained import tiny_transformer

from transformer_cli.inference.near import Datastore, NearMatchDecoder
from transformer_cli.inference.near_keys import Keys
from transformer_cli.inference.outputs import NearSettings
from transformer_cli.inference.search import beam_search, greedy_search
from transformer_cli.tokenizers.vocab import EOS, PAD, SOS

EXACT = NearSettings(neighbours=1, temperature=1.0, weight=1.0, reach=1e9, doubt=0.0)  # the nearest entry decides


@pytest.fixture(scope="module")
def transformer():
    return tiny_transformer(3)


def keys_of(model, src: torch.Tensor, target: list[int]) -> Keys:
    """The keys of the pair (src's row [src_len], target ids without <sos>/<eos>)."""
    tgt_in = torch.tensor([[SOS, *target]])
    with torch.inference_mode():
        hidden = model.features(src[None], tgt_in)[0].float()
    return Keys(hidden, torch.tensor([*target, EOS]))


def decoded(model, src, limits, store: Datastore, settings: NearSettings, beam: int = 1):
    near = NearMatchDecoder(model, store, settings)
    found = greedy_search(near, src, limits) if beam == 1 else [h[0] for h in beam_search(near, src, limits, beam)]
    return found, near.consulted


def test_features_are_what_the_generator_reads_in_teacher_forcing_and_in_steps(transformer):
    model, src, limits = transformer
    tgt_in = torch.tensor([[SOS, 7, 9, 11]])
    with torch.inference_mode():
        whole = model.features(src[:1], tgt_in)  # [1, 4, d_model]
        assert torch.allclose(model.generator(whole), model(src[:1], tgt_in))
        state = model.start(src[:1])
        for t in range(4):
            log_probs, hidden, state = model.step_features(tgt_in[:, t], state)
            assert torch.allclose(hidden[0], whole[0, t], atol=1e-5)
            assert torch.allclose(log_probs, torch.log_softmax(model.generator(hidden), -1), atol=1e-6)


@pytest.mark.parametrize("beam", [1, 4])
def test_a_line_with_its_own_pair_as_example_is_decoded_as_that_pairs_target(transformer, beam):
    """Each step's state is the example's own at that position (distance ~0), so with the
    nearest entry given all the weight the output follows the example token for token, though
    the random model would write something else."""
    model, src, limits = transformer
    target = [5, 17, 23, 8, 12]
    plain = greedy_search(model, src[:1], limits[:1])[0].tokens
    assert plain != target
    store = Datastore.of([[keys_of(model, src[0], target)]], torch.device("cpu"))
    [found], consulted = decoded(model, src[:1], limits[:1], store, EXACT, beam)
    assert found.tokens == target
    assert consulted == [{0}]


@pytest.mark.parametrize("beam", [1, 3])
def test_lines_without_examples_decode_bit_for_bit_as_without_beside_lines_with(transformer, beam):
    model, src, limits = transformer
    alone = greedy_search(model, src, limits) if beam == 1 else [h[0] for h in beam_search(model, src, limits, beam)]
    per_line: list[list[Keys]] = [[] for _ in range(len(src))]
    for line in (0, 3, 5):  # examples for some lines only: their own pair with another target
        per_line[line] = [keys_of(model, src[line], [6, 7, 8]), keys_of(model, src[line], [9, 10])]
    found, consulted = decoded(model, src, limits, Datastore.of(per_line, torch.device("cpu")), EXACT, beam)
    for line in range(len(src)):
        if per_line[line]:
            assert consulted[line]
        else:
            assert found[line] == alone[line]  # tokens and scores, exactly
            assert not consulted[line]


@pytest.mark.parametrize("change", [{"weight": 0.0}, {"reach": 0.0}])
def test_no_weight_or_no_reach_is_the_model_alone(transformer, change):
    model, src, limits = transformer
    per_line = [[keys_of(model, src[i], [5, 17, 23])] for i in range(len(src))]
    settings = dataclasses.replace(EXACT, **change)
    found, consulted = decoded(model, src, limits, Datastore.of(per_line, torch.device("cpu")), settings)
    assert found == greedy_search(model, src, limits)
    assert consulted == [set() for _ in range(len(src))]


def test_the_share_falls_with_distance_and_the_neighbours_vote_by_it(transformer):
    """Two entries of one line at distances 1 and 3 (temperature 1): their weights are
    softmax(-d) and the mix is lam * p_near + (1 - lam) * p_model, lam = weight (1 - d_min / reach)."""
    model, _, _ = transformer
    d_model = model.generator.in_features
    hidden = torch.zeros(1, d_model)
    keys = torch.zeros(2, d_model)
    keys[0, 0], keys[1, 0] = 1.0, 3.0**0.5  # squared distances from hidden: 1 and 3
    store = Datastore.of([[Keys(keys, torch.tensor([4, 6]))]], torch.device("cpu"))
    settings = NearSettings(neighbours=2, temperature=1.0, weight=0.5, reach=4.0, doubt=0.0)
    near = NearMatchDecoder(model, store, settings)
    log_probs = torch.log_softmax(torch.randn(1, 30), -1)
    mixed = near._mixed(log_probs.clone(), hidden, torch.tensor([0])).exp()  # (mixes in place)
    lam = 0.5 * (1 - 1 / 4)
    w = torch.softmax(torch.tensor([-1.0, -3.0]), 0)
    expected = (1 - lam) * log_probs.exp()
    expected[0, 4] += lam * w[0]
    expected[0, 6] += lam * w[1]
    assert torch.allclose(mixed, expected, atol=1e-6)
    assert near.consulted == [{0}]


def test_padding_of_a_short_line_is_never_a_neighbour(transformer):
    model, src, limits = transformer
    long = keys_of(model, src[0], list(range(4, 20)))
    short = keys_of(model, src[1], [5])
    store = Datastore.of([[long], [short]], torch.device("cpu"))
    assert store.keys.shape[:2] == (2, 17)
    many = dataclasses.replace(EXACT, neighbours=8, temperature=1e-3)
    found, _ = decoded(model, src[:2], limits[:2], store, many)
    assert found[1].tokens == [5]  # its one entry outvotes nothing: the padding has no weight
    assert PAD not in found[1].tokens


def test_doubt_gives_the_examples_less_where_the_model_is_sure(transformer):
    """lam times (1 - the model's top probability) ** doubt: a row whose model is certain keeps
    its distribution, an unsure one is mixed as without doubt at (1 - top) ** doubt of the share."""
    model, _, _ = transformer
    d_model = model.generator.in_features
    store = Datastore.of([[Keys(torch.zeros(1, d_model), torch.tensor([4]))]], torch.device("cpu"))
    settings = NearSettings(neighbours=1, temperature=1.0, weight=0.5, reach=4.0, doubt=2.0)
    sure = torch.full((1, 30), -1e4)
    sure[0, 9] = 0.0
    unsure = torch.log_softmax(torch.zeros(1, 30), -1)
    near = NearMatchDecoder(model, store, settings)
    assert torch.equal(near._mixed(sure, torch.zeros(1, d_model), torch.tensor([0])), sure)
    lam = 0.5 * (1 - 1 / 30) ** 2
    expected = (1 - lam) * unsure.exp()
    expected[0, 4] += lam
    assert torch.allclose(near._mixed(unsure, torch.zeros(1, d_model), torch.tensor([0])).exp(), expected, atol=1e-6)
