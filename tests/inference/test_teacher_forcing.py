"""inference/teacher_forcing.py: the scoring batches of a split (each pair in exactly one
shard's), the NLL of references cut to a model's positions, and eval_mode, the one way
scoring and decoding switch dropout off and give every submodule its own mode back. (The
summed NLL against the loss, by shards: tests/test_evaluate.py.)"""

from __future__ import annotations

import pytest
import torch

from transformer_cli.data.shards import EncodedSplit
from transformer_cli.inference.teacher_forcing import corpus_nll, eval_mode, scoring_batches
from transformer_cli.model.transformer import Seq2SeqTransformer
from transformer_cli.model.transformer_config import TransformerConfig

CPU = torch.device("cpu")


def split(n: int = 20, longest: int = 12) -> EncodedSplit:
    g = torch.Generator().manual_seed(2)
    sides = [
        [torch.randint(4, 30, (int(k),), generator=g).tolist() for k in torch.randint(1, longest, (n,), generator=g)]
        for _ in range(2)
    ]
    return EncodedSplit.from_lists(*sides)


def model() -> Seq2SeqTransformer:
    torch.manual_seed(0)
    cfg = TransformerConfig(d_model=16, n_heads=2, n_encoder_layers=1, n_decoder_layers=1, d_ff=32, max_len=64)
    return Seq2SeqTransformer(cfg, 30, 30)


def test_each_pair_is_scored_in_exactly_one_shard():
    s = split()
    whole = sorted(i for batch in scoring_batches(s, batch_tokens=40) for i in batch.tolist())
    assert whole == list(range(len(s)))
    shards = [sorted(i for batch in scoring_batches(s, (rank, 3), 40) for i in batch.tolist()) for rank in range(3)]
    assert sorted(sum(shards, [])) == whole and all(shards)
    assert len(scoring_batches(s, batch_tokens=10_000)) == 1  # the budget decides the batches


def test_references_are_cut_to_the_models_positions():
    s, m = split(longest=30), model()
    _, all_tokens = corpus_nll(m, s, CPU, None)
    _, cut_tokens = corpus_nll(m, s, CPU, None, max_positions=8)
    assert int(cut_tokens) < int(all_tokens)
    assert int(cut_tokens) <= len(s) * 8


def test_eval_mode_switches_dropout_off_and_gives_each_submodule_its_mode_back():
    m = model().train()
    m.encoder.eval()  # a mix, as a caller may have left it
    before = {name: sub.training for name, sub in m.named_modules()}
    with eval_mode(m):
        assert not any(sub.training for sub in m.modules())
    assert {name: sub.training for name, sub in m.named_modules()} == before
    with pytest.raises(RuntimeError), eval_mode(m):
        raise RuntimeError("a failed decode")
    assert {name: sub.training for name, sub in m.named_modules()} == before
    x = torch.randint(4, 30, (2, 5))
    with eval_mode(m):
        a, b = m(x, x), m(x, x)
    assert torch.equal(a, b)  # no dropout draws
