"""contracts/model.py: what every translation model keeps (TranslationModel) and what search
needs of one or of several decoding together (IncrementalDecoder), checked in behaviour on
the models tfm has (the Transformer in both norm placements, another vocabulary layout, an
ensemble), and statically: mypy reads the annotated assignments below; and an Architecture,
what ARCHITECTURES holds: a builder of such models and the settings class it reads."""

from __future__ import annotations

from typing import Any, Literal

import pytest
import torch

from transformer_cli.contracts.model import Architecture, IncrementalDecoder, TranslationModel
from transformer_cli.contracts.tokenizer import SpecialIds
from transformer_cli.inference.ensemble import Ensemble
from transformer_cli.model.builders import build_model
from transformer_cli.model.transformer import Seq2SeqTransformer
from transformer_cli.model.transformer_config import TransformerConfig
from transformer_cli.seams import ARCHITECTURES
from transformer_cli.tokenizers.vocab import TFM_IDS

SRC_VOCAB, TGT_VOCAB = 23, 31
ELSEWHERE = SpecialIds(unk=5, pad=7, sos=0, eos=11)  # a pretrained vocabulary's layout


def transformer(
    norm: Literal["post", "pre"] = "post", ids: SpecialIds = TFM_IDS, seed: int = 0
) -> TranslationModel[Any]:
    torch.manual_seed(seed)
    cfg = TransformerConfig(d_model=16, n_heads=2, d_ff=32, n_encoder_layers=2, n_decoder_layers=2, norm=norm)
    model: TranslationModel[Any] = build_model("transformer", cfg, SRC_VOCAB, TGT_VOCAB, ids, ids)
    return model.eval()


def batch(ids: SpecialIds) -> tuple[torch.Tensor, torch.Tensor]:
    """Two sources (the second padded) and their decoder inputs, starting at `<sos>`."""
    gen = torch.Generator().manual_seed(1)
    src = torch.randint(12, SRC_VOCAB, (2, 6), generator=gen)
    src[0, -1] = src[1, -1] = ids.eos
    src[1, 3:] = ids.pad
    src[1, 2] = ids.eos
    tgt_in = torch.randint(12, TGT_VOCAB, (2, 5), generator=gen)
    tgt_in[:, 0] = ids.sos
    return src, tgt_in


def keeps_the_contract(model: TranslationModel[Any]) -> None:
    ids = model.src_ids
    src, tgt_in = batch(ids)
    assert isinstance(model.src_ids, SpecialIds) and isinstance(model.tgt_ids, SpecialIds)
    assert (model.src_vocab_size, model.tgt_vocab_size) == (SRC_VOCAB, TGT_VOCAB)
    assert isinstance(model.config.max_len, int) and not model.training
    assert model.num_parameters() == sum(p.numel() for p in model.parameters())
    with torch.no_grad():
        # teacher forcing: logits [batch, tgt_len, tgt_vocab]
        logits = model(src, tgt_in)
        assert logits.shape == (2, 5, TGT_VOCAB)
        expected = torch.log_softmax(logits.float(), dim=-1)
        # incremental decoding: each step's log-probabilities are teacher forcing's at that position
        state = model.start(src)
        for t in range(tgt_in.size(1)):
            log_probs, state = model.step(tgt_in[:, t], state)
            assert log_probs.shape == (2, TGT_VOCAB)
            torch.testing.assert_close(torch.log_softmax(log_probs, -1), expected[:, t], atol=1e-5, rtol=1e-5)
        # reorder: rows chosen (and repeated) follow their sentences
        state = model.start(src)
        first, state = model.step(tgt_in[:, 0], state)
        index = torch.tensor([1, 1, 0])
        moved, _ = model.step(tgt_in[index, 1], state.reorder(index))
        torch.testing.assert_close(torch.log_softmax(moved, -1), expected[index, 1], atol=1e-5, rtol=1e-5)
        # cross-attention: [batch, heads, tgt_len, src_len], a distribution over the real source
        weights = model.cross_attention(src, tgt_in)
        assert weights.shape[0] == 2 and weights.shape[2:] == (5, 6)
        torch.testing.assert_close(weights.sum(-1), torch.ones(weights.shape[:-1]), atol=1e-5, rtol=1e-5)
        assert torch.all(weights[1, :, :, 3:] == 0)  # the padding is never attended to
    assert set(model.state_dict()) and model.train().training and not model.eval().training


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_the_transformer_keeps_the_contract_and_is_rebuilt_by_its_name(norm):
    model = transformer(norm)
    keeps_the_contract(model)
    assert ARCHITECTURES.find(model.ARCHITECTURE) is not None
    again = build_model(
        model.ARCHITECTURE, model.config, model.src_vocab_size, model.tgt_vocab_size, model.src_ids, model.tgt_ids
    )
    assert type(again) is type(model)
    again.load_state_dict(model.state_dict())
    src, tgt_in = batch(model.src_ids)
    assert torch.equal(again.eval()(src, tgt_in), model(src, tgt_in))


def test_an_architecture_builds_models_from_its_settings_class():
    family = ARCHITECTURES["transformer"]
    assert isinstance(family, Architecture) and family.settings is TransformerConfig
    cfg = TransformerConfig(d_model=8, n_heads=2, d_ff=16, n_encoder_layers=1, n_decoder_layers=1)
    model: TranslationModel[Any] = family.build(cfg, SRC_VOCAB, TGT_VOCAB, TFM_IDS, ELSEWHERE)
    assert isinstance(model, Seq2SeqTransformer) and (model.src_ids, model.tgt_ids) == (TFM_IDS, ELSEWHERE)


def test_special_ids_are_the_vocabularys_wherever_it_keeps_them():
    model = transformer(ids=ELSEWHERE)
    assert (model.src_ids, model.tgt_ids) == (ELSEWHERE, ELSEWHERE)
    keeps_the_contract(model)  # the source's <pad> (7 here) is what is masked


def test_an_ensemble_decodes_as_a_model_does():
    members = [transformer(seed=0), transformer("pre", seed=1)]
    ensemble: TranslationModel[Any] = Ensemble(members, [1.0, 3.0]).eval()
    keeps_the_contract(ensemble)
    decoder: IncrementalDecoder[Any] = ensemble  # what search takes
    assert decoder.tgt_ids == members[0].tgt_ids
    one: IncrementalDecoder[Any] = Ensemble(members[:1]).eval()  # one member: that model
    src, tgt_in = batch(TFM_IDS)
    with torch.no_grad():
        alone, _ = members[0].step(tgt_in[:, 0], members[0].start(src))
        torch.testing.assert_close(one.step(tgt_in[:, 0], one.start(src))[0], alone)


def test_seq2seq_transformer_is_a_translation_model_by_type():
    model: TranslationModel[Any] = Seq2SeqTransformer(TransformerConfig(d_model=16, n_heads=2, d_ff=32), 9, 9)
    assert model.ARCHITECTURE == "transformer"
