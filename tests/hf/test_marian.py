"""hf/marian.py: the correspondence between MarianMT and tfm's Transformer, without
transformers: config.json <-> settings and the reasons one has no equivalent in the other,
every weight by name both ways, the id order (`<pad>` last) and the feature order
(interleaved <-> halves) that keep a conversion exact. (Against transformers itself:
test_folder.py and test_hf_export.py.)"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from transformer_cli.hf.marian import (
    export_refusals,
    feature_order,
    hf_config,
    model_settings,
    permute_features,
    reorder_vocab,
    to_hf,
    to_tfm,
    vocab_order,
)
from transformer_cli.model.layers import SinusoidalPositionalEncoding
from transformer_cli.model.transformer import Seq2SeqTransformer
from transformer_cli.model.transformer_config import TransformerConfig

MARIAN_LIKE = dict(
    d_model=16,
    n_heads=2,
    d_ff=24,
    n_encoder_layers=2,
    n_decoder_layers=1,
    activation="swish",
    output_bias=True,
    sinusoid_layout="halves",
    max_len=64,
)


def model(seed: int = 0, **changes) -> Seq2SeqTransformer:
    torch.manual_seed(seed)
    cfg = TransformerConfig(**{**MARIAN_LIKE, **changes})
    net = Seq2SeqTransformer(cfg, 19, 19 if cfg.share_embeddings else 23).eval()
    with torch.no_grad():
        if net.generator.bias is not None:
            net.generator.bias.normal_()  # not zeros: its rows must move too
    return net


def logits(net: Seq2SeqTransformer) -> torch.Tensor:
    gen = torch.Generator().manual_seed(3)
    src = torch.randint(4, net.src_vocab_size, (2, 7), generator=gen)
    tgt = torch.randint(4, net.tgt_vocab_size, (2, 5), generator=gen)
    with torch.no_grad():
        return net(src, tgt)


@pytest.mark.parametrize("shared, tied", [(True, True), (False, True), (False, False)])
def test_config_json_and_the_settings_round_trip(shared, tied):
    cfg = TransformerConfig(**{**MARIAN_LIKE, "share_embeddings": shared, "tie_output": tied, "dropout": 0.2})
    config = hf_config(cfg, 19, 23, pad=18, eos=3, start=18)
    assert (config["model_type"], config["vocab_size"], config["decoder_vocab_size"]) == ("marian", 19, 23)
    assert (config["pad_token_id"], config["decoder_start_token_id"], config["eos_token_id"]) == (18, 18, 3)
    settings, refusals = model_settings(config)
    assert refusals == [] and export_refusals(cfg, "transformer") == []
    again = TransformerConfig(**settings)
    assert again == dataclasses.replace(cfg, norm="post", positional="sinusoidal")


def test_every_reason_is_named_both_ways():
    config = hf_config(TransformerConfig(**MARIAN_LIKE), 19, 19, 18, 3, 18)
    config.update(
        model_type="bart",
        decoder_attention_heads=4,
        activation_function="tanh",
        normalize_before=True,
        add_final_layer_norm=True,
    )
    _, refusals = model_settings(config)
    assert refusals == [
        "model_type 'bart' (tfm reads marian)",
        "encoder_attention_heads=2 differs from decoder_attention_heads=4",
        "activation_function 'tanh' (tfm has gelu, relu, silu, swish)",
        "normalize_before=true (Marian is post-norm without extra layer norms)",
        "add_final_layer_norm=true (Marian is post-norm without extra layer norms)",
    ]
    assert model_settings({**config, "activation_function": "silu"})[0]["activation"] == "swish"
    cfg = TransformerConfig(**{**MARIAN_LIKE, "norm": "pre", "positional": "learned"})
    assert export_refusals(cfg, "transformer") == [
        "model.norm='pre' (Marian is post-norm)",
        "model.positional='learned' (Marian computes sinusoids)",
    ]
    assert export_refusals(cfg, "toy") == ["model.architecture='toy' (the Hugging Face exporter converts transformer)"]


@pytest.mark.parametrize("shared, tied", [(True, True), (False, True), (False, False)])
def test_every_weight_goes_over_by_name_and_comes_back(shared, tied):
    net = model(share_embeddings=shared, tie_output=tied)
    hf = to_hf(net.state_dict(), net.config)
    assert ("model.shared.weight" in hf) == shared and ("lm_head.weight" in hf) == (not tied)
    assert hf["final_logits_bias"].shape == (1, net.tgt_vocab_size)
    k, v = (
        hf["model.decoder.layers.0.encoder_attn.k_proj.weight"],
        hf["model.decoder.layers.0.encoder_attn.v_proj.weight"],
    )
    assert torch.equal(torch.cat([k, v]), net.state_dict()["decoder.layers.0.cross_attn.kv_proj.weight"])
    back = to_tfm(hf, net.config)
    rebuilt = model(seed=1, share_embeddings=shared, tie_output=tied)
    rebuilt.load_state_dict(back)  # every weight, by name (the positional table is computed)
    assert torch.equal(logits(rebuilt), logits(net))
    with pytest.raises(KeyError, match="model.shared.weight"):
        to_tfm({k: w for k, w in hf.items() if "embed_tokens" not in k and "shared" not in k}, net.config)


def test_the_ids_move_so_that_pad_is_last_and_back():
    assert vocab_order(6, pad=1) == [0, 2, 3, 4, 5, 1]
    assert vocab_order(6, pad=5) == list(range(6))  # already last: the identity
    net = model(share_embeddings=False, tie_output=False)
    hf = to_hf(net.state_dict(), net.config)
    src, tgt = vocab_order(19, 1), vocab_order(23, 1)
    moved = reorder_vocab(hf, src, tgt)
    assert torch.equal(moved["model.encoder.embed_tokens.weight"][-1], hf["model.encoder.embed_tokens.weight"][1])
    assert torch.equal(moved["lm_head.weight"][-1], hf["lm_head.weight"][1])
    assert torch.equal(moved["final_logits_bias"][0, -1], hf["final_logits_bias"][0, 1])
    back = reorder_vocab(moved, torch.tensor(src).argsort().tolist(), torch.tensor(tgt).argsort().tolist())
    assert all(torch.equal(back[name], hf[name]) for name in hf)


def test_an_interleaved_model_is_the_same_function_with_its_features_in_halves_order():
    d = MARIAN_LIKE["d_model"]
    order = feature_order(d)
    assert sorted(order.tolist()) == list(range(d))
    interleaved = SinusoidalPositionalEncoding(d, 32, layout="interleaved").table
    halves = SinusoidalPositionalEncoding(d, 32, layout="halves").table
    torch.testing.assert_close(interleaved[:, order], halves, atol=1e-5, rtol=0)
    net = model(sinusoid_layout="interleaved", share_embeddings=True, tie_output=True)
    permuted = permute_features(to_hf(net.state_dict(), net.config), order)
    halves_net = model(seed=1, share_embeddings=True, tie_output=True)  # sinusoid_layout: halves
    halves_net.load_state_dict(to_tfm(permuted, halves_net.config))
    torch.testing.assert_close(logits(halves_net), logits(net), atol=1e-5, rtol=1e-5)
    undone = permute_features(permuted, order.argsort())
    assert all(torch.equal(undone[k], w) for k, w in to_hf(net.state_dict(), net.config).items())
