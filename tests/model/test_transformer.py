import math

import pytest
import torch

from transformer_cli.model.attention import padding_mask
from transformer_cli.model.layers import SinusoidalPositionalEncoding
from transformer_cli.model.transformer import Seq2SeqTransformer
from transformer_cli.model.transformer_config import TransformerConfig
from transformer_cli.tokenizers.vocab import EOS, PAD, SOS


def make_model(**kw) -> Seq2SeqTransformer:
    torch.manual_seed(0)
    cfg = TransformerConfig(
        **{
            "d_model": 32,
            "n_heads": 4,
            "n_encoder_layers": 2,
            "n_decoder_layers": 2,
            "d_ff": 64,
            "dropout": 0.1,
            "max_len": 64,
            **kw,
        }
    )
    return Seq2SeqTransformer(cfg, 50, 40).eval()


def batch(seed=0, b=3, s=7, t=6):
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(4, 50, (b, s), generator=g)
    tgt = torch.randint(4, 40, (b, t), generator=g)
    tgt[:, 0] = SOS
    return src, tgt


@pytest.mark.parametrize("norm", ["post", "pre"])
@pytest.mark.parametrize("positional", ["learned", "sinusoidal"])
def test_shapes(norm, positional):
    model = make_model(norm=norm, positional=positional)
    src, tgt = batch()
    assert model(src, tgt).shape == (3, 6, 40)
    assert model.cross_attention(src, tgt).shape == (3, 4, 6, 7)


def test_causal_mask_blocks_the_future():
    model = make_model()
    src, tgt = batch()
    changed = tgt.clone()
    changed[:, 4:] = torch.randint(4, 40, changed[:, 4:].shape)
    a, b = model(src, tgt), model(src, changed)
    assert torch.allclose(a[:, :4], b[:, :4], atol=1e-5)
    assert not torch.allclose(a[:, 4:], b[:, 4:], atol=1e-3)


def test_padding_is_ignored():
    model = make_model()
    src, tgt = batch()
    src[0, 5:] = PAD  # sentence 0 is 5 tokens long
    longer_src = torch.cat([src, torch.full((3, 4), PAD)], dim=1)
    longer_src[1:, 7:] = torch.randint(4, 50, (2, 4))  # other sentences get longer
    a, b = model(src, tgt), model(longer_src, tgt)
    assert torch.allclose(a[0], b[0], atol=1e-5)
    assert padding_mask(src, PAD)[0, 0, 0].tolist() == [True] * 5 + [False] * 2
    # garbage in the vectors behind sentence 0's padding (the <pad> embedding row, which
    # those positions carry through every layer) changes nothing either: they are masked
    with torch.no_grad():
        model.encoder.embed.weight[PAD] = 100 * torch.randn(32)
    assert torch.allclose(model(src, tgt)[0], a[0], atol=1e-5)
    # target padding: positions before it are unaffected
    padded_tgt = torch.cat([tgt, torch.full((3, 3), PAD)], dim=1)
    assert torch.allclose(model(src, padded_tgt)[:, :6], a, atol=1e-5)


def test_sinusoidal_table_follows_the_formula():
    pe = SinusoidalPositionalEncoding(16, 50)
    pos, i = 7, 3
    assert math.isclose(pe(0, 50)[pos, 2 * i], math.sin(pos / 10000 ** (2 * i / 16)), abs_tol=1e-6)
    assert math.isclose(pe(0, 50)[pos, 2 * i + 1], math.cos(pos / 10000 ** (2 * i / 16)), abs_tol=1e-6)
    assert torch.equal(pe(5, 3), pe(0, 8)[5:])


def test_learned_positions_have_parameters_and_sinusoidal_do_not():
    learned, fixed = make_model(positional="learned"), make_model(positional="sinusoidal")
    assert learned.num_parameters() - fixed.num_parameters() == 2 * 64 * 32
    assert not any("positions" in n for n, _ in fixed.named_parameters())


def test_shared_and_tied_embeddings():
    torch.manual_seed(0)
    model = Seq2SeqTransformer(TransformerConfig(d_model=32, n_heads=4, share_embeddings=True, tie_output=True), 60, 60)
    assert model.encoder.embed is model.decoder.embed
    assert model.generator.weight is model.decoder.embed.weight
    untied = Seq2SeqTransformer(TransformerConfig(d_model=32, n_heads=4), 60, 60)
    assert model.num_parameters() == untied.num_parameters() - 2 * 60 * 32


@pytest.mark.parametrize("norm", ["post", "pre"])
@pytest.mark.parametrize("positional", ["learned", "sinusoidal"])
def test_incremental_step_equals_full_forward(norm, positional):
    model = make_model(norm=norm, positional=positional)
    src, tgt = batch(b=2, t=8)
    src[1, 4:] = PAD
    full = torch.log_softmax(model(src, tgt), dim=-1)
    state = model.start(src)
    for t in range(tgt.size(1)):
        step, state = model.step(tgt[:, t], state)
        assert torch.allclose(step, full[:, t], atol=1e-5), t
    assert state.position == tgt.size(1)


def test_step_reorder_duplicates_rows():
    model = make_model()
    src, _ = batch(b=2)
    state = model.start(src)
    logp, state = model.step(torch.full((2,), SOS), state)
    twice = state.reorder(torch.tensor([1, 1, 0]))
    again, _ = model.step(torch.tensor([EOS, EOS, EOS]), twice)
    ref, _ = model.step(torch.tensor([EOS, EOS]), state)
    assert torch.allclose(again[0], ref[1], atol=1e-5) and torch.allclose(again[2], ref[0], atol=1e-5)
