"""Ensemble decoding: one beam over several models' combined distributions."""

from __future__ import annotations

import math

import pytest
import torch
from helpers import run_tfm, sentence_pairs, untrained_checkpoint

from transformer_cli.api import load, open_backend
from transformer_cli.checkpoint import Checkpoint
from transformer_cli.config import DecodeConfig
from transformer_cli.errors import UsageError
from transformer_cli.inference.ensemble import Ensemble
from transformer_cli.inference.search import beam_search, output_limits
from transformer_cli.inference.translate import model_from_checkpoint

LINES = [de for de, _ in sentence_pairs(40, seed=3)]


@pytest.fixture(scope="module")
def members(tmp_path_factory):
    """Three untrained models of one vocabulary (different seeds), made in well under a second."""
    folder = tmp_path_factory.mktemp("members")
    paths = []
    for seed in range(3):
        torch.manual_seed(seed)
        path = untrained_checkpoint(folder / f"m{seed}.pt")
        checkpoint = Checkpoint.read(path)
        model, _ = model_from_checkpoint(checkpoint)
        with torch.no_grad():  # other weights than the helper's fixed seed gives
            for p in model.parameters():
                p.mul_(3.0).add_(torch.randn_like(p) * 0.3)
        checkpoint.weights = model.state_dict()
        checkpoint.write(path)
        paths.append(path)
    return paths


@pytest.mark.parametrize("combine", ["log", "prob"])
@pytest.mark.parametrize("beam, n_best", [(1, 1), (4, 3)])
def test_a_model_with_itself_decodes_exactly_as_the_model(members, combine, beam, n_best):
    decode = DecodeConfig(beam_size=beam, n_best=n_best)
    alone = open_backend(members[0], "cpu", decode=decode).translate(LINES)
    twice = open_backend([members[0], members[0]], "cpu", decode=decode, ensemble_combine=combine)
    assert [[(h.tokens, h.score) for h in hyps] for hyps in twice.translate(LINES).translations] == [
        [(h.tokens, h.score) for h in hyps] for hyps in alone.translations
    ]


def _reference_beam(models, weights, combine, src, limit, k, sos, eos):
    """One sentence at a time, every prefix re-run through every model (no caches, no
    batching): the textbook ensemble beam that the batched search must equal."""
    w = torch.tensor(weights) / sum(weights)
    beams, ended = [([], 0.0)], []
    for t in range(limit):
        candidates = []
        for prefix, score in beams:
            tgt = torch.tensor([[sos, *prefix]])
            lps = torch.stack([torch.log_softmax(m(src, tgt)[0, -1].float(), -1) for m in models])
            if combine == "log":
                lp = (w[:, None] * lps).sum(0)
            else:
                lp = torch.logsumexp(lps + w.log()[:, None], 0)
            lp[sos] = -math.inf
            if t + 1 >= limit:
                lp = torch.full_like(lp, -math.inf)
                lp[eos] = 0.0
            candidates += [(score + float(v), prefix, int(i)) for v, i in zip(*lp.topk(2 * k))]
        candidates.sort(key=lambda c: -c[0])
        candidates = candidates[: 2 * k]
        beams = []
        for rank, (score, prefix, token) in enumerate(candidates):
            if token == eos:
                if rank < k and score > -math.inf:
                    ended.append((prefix, score))
            elif len(beams) < k:
                beams.append(([*prefix, token], score))
        if len(ended) >= k or t + 1 >= limit:
            break
    return max(ended, key=lambda e: e[1] / (len(e[0]) + 1))[0]


@pytest.mark.parametrize("combine", ["log", "prob"])
def test_batched_ensemble_beam_search_equals_the_reference(members, combine):
    models = [model_from_checkpoint(Checkpoint.read(p))[0].eval() for p in members]
    tokenizers = model_from_checkpoint(Checkpoint.read(members[0]))[1]
    weights = [1.0, 2.0, 0.5]
    ensemble = Ensemble(models, weights, combine).eval()
    ids = [torch.tensor([*x, tokenizers.src.ids.eos]) for x in tokenizers.src.encode_batch(LINES[:12])]
    src = torch.nn.utils.rnn.pad_sequence(ids, batch_first=True, padding_value=tokenizers.src.ids.pad)
    limits = output_limits(torch.tensor([len(x) for x in ids]), 0.0, 9, cap=64)
    got = [h[0].tokens for h in beam_search(ensemble, src, limits, beam_size=3)]
    ids_tgt = tokenizers.tgt.ids
    with torch.no_grad():
        expected = [_reference_beam(models, weights, combine, x[None], 9, 3, ids_tgt.sos, ids_tgt.eos) for x in ids]
    assert got == expected


def test_models_of_other_vocabularies_are_refused_in_one_line(members, tmp_path):
    other = tmp_path / "other.pt"
    checkpoint = Checkpoint.read(untrained_checkpoint(other))
    state = checkpoint.tokenizer["shared"]
    from transformer_cli.config import TokenizerConfig
    from transformer_cli.tokenizers.pair import TokenizerPair
    from transformer_cli.tokenizers.subword import SubwordTokenizer

    retrained = SubwordTokenizer.train([de for de, _ in sentence_pairs(300, seed=9)], TokenizerConfig(vocab_size=60), 1)
    assert retrained.model != state["model"]
    checkpoint.tokenizer = TokenizerPair(retrained, retrained, joint=True).state()
    checkpoint.write(other)
    with pytest.raises(
        UsageError,
        match=r"^cannot decode .*m0\.pt and .*other\.pt together: their "
        r"target vocabularies differ",
    ):
        load([members[0], other], device="cpu")
    r = run_tfm("translate", "--checkpoint", str(members[0]), "--checkpoint", str(other), "Ein Hund.")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "target vocabularies differ" in r.stderr


def test_the_cli_and_the_api_decode_an_ensemble(members, tmp_path):
    r = run_tfm("translate", *(a for p in members for a in ("--checkpoint", str(p))), "--beam-size", "3", *LINES[:3])
    assert r.returncode == 0, r.stderr
    model = load(members, device="cpu", ensemble_weights=[1, 2, 0.5], ensemble_combine="prob")
    assert [str(p) for p in model.paths] == [str(p) for p in members]
    assert model.backend.metadata.ensemble_weights == pytest.approx([1 / 3.5, 2 / 3.5, 0.5 / 3.5])
    assert model.backend.metadata.ensemble_combine == "prob"
    assert len(r.stdout.splitlines()) == 3
    with pytest.raises(UsageError, match="one positive number per model"):
        load(members, device="cpu", ensemble_weights=[1, 2])
