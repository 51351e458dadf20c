"""inference/translate.py: TranslationBackend, text in and text out, and TorchTranslator, its
torch backend: a checkpoint's model with its decoding defaults; empty lines answered without
decoding, long inputs truncated and reported, batches sorted by length with the answers in the
lines' order, lines encoded once then decoded; the NLL and cross-attention of a sentence.
(Trained models through tfm translate: test_translate_cli.py.)"""

from __future__ import annotations

import dataclasses

import pytest
import torch
from helpers import untrained_checkpoint

from transformer_cli.checkpoint import Checkpoint, CheckpointError
from transformer_cli.config import DecodeConfig
from transformer_cli.data.shards import EncodedSplit
from transformer_cli.inference.translate import (
    ModelMetadata,
    TorchTranslator,
    TranslationBackend,
    model_from_checkpoint,
)

CPU = torch.device("cpu")
LINES = ["Ein Mann sieht einen Ball.", "", "Zwei Hunde.", "Eine Frau trägt einen Hut im Park.", "   "]
GREEDY = DecodeConfig(beam_size=1, max_len_a=0.0, max_len_b=6, batch_size=2)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return untrained_checkpoint(tmp_path_factory.mktemp("translate") / "m.pt", max_len=16)


@pytest.fixture(scope="module")
def backend(checkpoint):
    return TorchTranslator.from_checkpoint(checkpoint, CPU, GREEDY)


def test_a_checkpoint_is_its_model_its_decoding_defaults_and_what_it_says_of_itself(checkpoint):
    read = Checkpoint.read(checkpoint)
    model, tokenizers = model_from_checkpoint(read, checkpoint)
    assert model.config.max_len == 16 and tokenizers.state() == read.tokenizer
    backend = TorchTranslator.load(read, CPU)
    assert backend.decode == DecodeConfig() and backend.max_src_len == 15  # room for <eos>
    assert backend.metadata.sha256 == read.digest and backend.metadata.languages == ("de", "en")
    assert ModelMetadata(config={"data": {"src_lang": "de"}}).languages is None
    broken = dataclasses.replace(read, weights={})
    with pytest.raises(CheckpointError, match="m.pt: checkpoint does not fit this version of tfm"):
        model_from_checkpoint(broken, checkpoint)


class _NoExamples(TranslationBackend):
    """A backend whose model reads no examples (CTranslate2's, a plugin's): the interface's own."""

    def _search(self, sources, d):
        return [[] for _ in sources]

    def corpus_nll(self, split, check_stop=None):
        return 0.0, 0

    def cross_attention(self, line, translation, recase=None):
        return [], [], []


def test_only_a_backend_whose_model_reads_examples_gives_their_keys(backend):
    """`reads_examples` says whether `example_keys` answers: the interface's does not (a
    TypeError naming the backend), the torch backend's model does (near-matches)."""
    plain = _NoExamples(backend.tokenizers, backend.decode, backend.max_src_len + 1, backend.metadata)
    assert not plain.reads_examples
    with pytest.raises(TypeError, match="^_NoExamples reads no examples"):
        plain.example_keys([("Ein hut.", "A hat.")])
    assert backend.reads_examples
    assert len(backend.example_keys([("Ein hut.", "A hat."), ("Ein buch.", "A book.")])) == 2


def test_answers_come_in_the_lines_order_empty_lines_empty(backend):
    out = backend.translate(LINES)
    assert len(out.translations) == len(LINES)
    assert [hyps[0].text for hyps in out.translations][1::3] == ["", ""]  # blank lines: not decoded
    alone = [backend.translate([line]).translations[0][0].tokens for line in LINES]
    assert [hyps[0].tokens for hyps in out.translations] == alone  # batching changes no answer
    assert all(len(hyps[0].tokens) <= 6 for hyps in out.translations)  # max_len_b
    n_best = backend.translate(LINES[:1], dataclasses.replace(GREEDY, beam_size=3, n_best=3))
    assert len(n_best.translations[0]) == 3 and backend.decode == GREEDY  # for that call only


def test_long_inputs_are_truncated_and_reported(backend):
    long = " ".join(["Ein Mann sieht einen Ball."] * 6)
    out = backend.translate(["Zwei Hunde.", long])
    [(index, length)] = out.truncated
    assert index == 1 and length == len(backend.tokenizers.src.encode(long)) > backend.max_src_len
    sources = backend.encode(["Zwei Hunde.", "", long])
    assert sources.positions == [0, 2] and sources.truncated == [(2, length)]
    assert len(sources.ids[1]) == backend.max_src_len + 1  # cut, then <eos>
    assert backend.translate_encoded(sources).translations[2] == out.translations[1]


def test_stops_are_checked_before_each_batch(backend):
    calls: list[int] = []
    backend.translate(LINES, check_stop=lambda: calls.append(1))
    assert len(calls) == 2  # 3 non-empty lines, 2 a batch


def test_the_nll_and_the_attention_of_a_sentence(backend):
    tok = backend.tokenizers
    split = EncodedSplit.from_lists(tok.src.encode_batch(LINES[:1]), tok.tgt.encode_batch(["A man sees a ball."]))
    nll, tokens = backend.corpus_nll(split)
    assert tokens == len(tok.tgt.encode("A man sees a ball.")) + 1 and nll > 0  # <eos> scored
    best = backend.translate(["Zwei Hunde."]).translations[0][0]
    src, tgt, weights = backend.cross_attention("Zwei Hunde.", best)
    assert src == tok.src.id_to_token([*tok.src.encode("Zwei Hunde."), tok.src.ids.eos])
    assert tgt == tok.tgt.id_to_token([*best.tokens, tok.tgt.ids.eos])
    assert len(weights) == len(tgt) and all(abs(sum(row) - 1) < 1e-4 for row in weights)
