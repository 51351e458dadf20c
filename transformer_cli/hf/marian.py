"""MarianMT (transformers' `MarianMTModel`) and tfm's Transformer, side by side: the settings of
config.json, the weights by name, and the two reorderings a conversion may need.

Weights, transformers' name -> tfm's (N: a layer's index):

    model.shared.weight, or model.{encoder,decoder}.embed_tokens.weight  {encoder,decoder}.embed.embedding.weight
    lm_head.weight (only when not tied to the target embedding)        generator.weight
    final_logits_bias [1, V]                                           generator.bias [V] (model.output_bias)
    model.encoder.layers.N.self_attn.{q_proj,out_proj}                 encoder.layers.N.self_attn.{q_proj,out_proj}
    model.encoder.layers.N.self_attn.{k_proj,v_proj}                   encoder.layers.N.self_attn.kv_proj (k, then v)
    model.encoder.layers.N.self_attn_layer_norm                        encoder.layers.N.attn_block.norm
    model.{encoder,decoder}.layers.N.fc1, fc2                          {encoder,decoder}.layers.N.feed_forward.w_1, w_2
    model.{encoder,decoder}.layers.N.final_layer_norm                  {encoder,decoder}.layers.N.ff_block.norm
    model.decoder.layers.N.self_attn (+ _layer_norm)                   decoder.layers.N.self_attn, self_block.norm
    model.decoder.layers.N.encoder_attn (+ _layer_norm)                decoder.layers.N.cross_attn, cross_block.norm

Marian is the post-norm Transformer with sinusoidal positions laid out in halves (all sines,
then all cosines: model.sinusoid_layout "halves"), embeddings scaled by √d_model when
`scale_embedding`, an output bias, swish, relu or gelu. The positional table is not stored;
both sides compute it.

Two reorderings keep a conversion exact:
- **ids**: transformers' Marian vocabularies end with `<pad>` (CTranslate2's converter drops
  that last row), tfm's put it at 1; `vocab_order` lists tfm ids in the exported order.
- **features**: a tfm model with interleaved sinusoids exports to the halves layout by
  permuting every weight along d_model (`feature_order`): the same function, computed with
  its features in another order (LayerNorm, attention and the feed-forward network are
  indifferent to that order as long as every weight follows it).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch
from torch import Tensor

from ..model.transformer_config import TransformerConfig

ACTIVATIONS = {"swish": "swish", "silu": "swish", "relu": "relu", "gelu": "gelu"}  # HF -> tfm
_HF_ACTIVATION = {"swish": "swish", "relu": "relu", "gelu": "gelu"}  # tfm -> HF

# (tfm, transformers) module names inside a layer; attention k/v are fused in tfm.
_ENCODER = [
    ("self_attn.q_proj", "self_attn.q_proj"),
    ("self_attn.out_proj", "self_attn.out_proj"),
    ("attn_block.norm", "self_attn_layer_norm"),
    ("feed_forward.w_1", "fc1"),
    ("feed_forward.w_2", "fc2"),
    ("ff_block.norm", "final_layer_norm"),
]
_DECODER = [
    ("self_attn.q_proj", "self_attn.q_proj"),
    ("self_attn.out_proj", "self_attn.out_proj"),
    ("self_block.norm", "self_attn_layer_norm"),
    ("cross_attn.q_proj", "encoder_attn.q_proj"),
    ("cross_attn.out_proj", "encoder_attn.out_proj"),
    ("cross_block.norm", "encoder_attn_layer_norm"),
    ("feed_forward.w_1", "fc1"),
    ("feed_forward.w_2", "fc2"),
    ("ff_block.norm", "final_layer_norm"),
]
_FUSED = {
    "encoder": [("self_attn.kv_proj", "self_attn")],
    "decoder": [("self_attn.kv_proj", "self_attn"), ("cross_attn.kv_proj", "encoder_attn")],
}


# --------------------------------------------------------------------------- settings


def model_settings(config: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """tfm model settings for a MarianMT config.json, and every reason tfm cannot express it."""
    refusals = []
    if config.get("model_type") != "marian":
        refusals.append(f"model_type {config.get('model_type')!r} (tfm reads marian)")
    for a, b in (("encoder_attention_heads", "decoder_attention_heads"), ("encoder_ffn_dim", "decoder_ffn_dim")):
        if config.get(a) != config.get(b):
            refusals.append(f"{a}={config.get(a)} differs from {b}={config.get(b)}")
    activation = ACTIVATIONS.get(str(config.get("activation_function", "gelu")))
    if activation is None:
        refusals.append(
            f"activation_function {config.get('activation_function')!r} (tfm has {', '.join(sorted(ACTIVATIONS))})"
        )
    for key in ("normalize_before", "add_final_layer_norm", "normalize_embedding"):
        if config.get(key):
            refusals.append(f"{key}=true (Marian is post-norm without extra layer norms)")
    settings = {
        "d_model": config.get("d_model"),
        "n_heads": config.get("encoder_attention_heads"),
        "n_encoder_layers": config.get("encoder_layers"),
        "n_decoder_layers": config.get("decoder_layers"),
        "d_ff": config.get("encoder_ffn_dim"),
        "dropout": float(config.get("dropout", 0.1)),
        "attention_dropout": float(config.get("attention_dropout", 0.0)),
        "activation_dropout": float(config.get("activation_dropout", 0.0)),
        "activation": activation or "relu",
        "positional": "sinusoidal",
        "sinusoid_layout": "halves",
        "max_len": config.get("max_position_embeddings"),
        "norm": "post",
        "tie_output": bool(config.get("tie_word_embeddings", True)),
        "share_embeddings": bool(config.get("share_encoder_decoder_embeddings", True)),
        "scale_embeddings": bool(config.get("scale_embedding", False)),
        "output_bias": True,
    }
    return settings, refusals


def export_refusals(cfg: TransformerConfig, architecture: str) -> list[str]:
    """Every reason a tfm model of these settings has no MarianMT equivalent."""
    if architecture != "transformer":
        return [f"model.architecture={architecture!r} (the Hugging Face exporter converts transformer)"]
    out = []
    if cfg.norm != "post":
        out.append(f"model.norm={cfg.norm!r} (Marian is post-norm)")
    if cfg.positional != "sinusoidal":
        out.append(f"model.positional={cfg.positional!r} (Marian computes sinusoids)")
    if cfg.activation not in _HF_ACTIVATION:
        out.append(f"model.activation={cfg.activation!r}")
    return out


def hf_config(
    cfg: TransformerConfig, src_vocab_size: int, tgt_vocab_size: int, pad: int, eos: int, start: int
) -> dict[str, Any]:
    """config.json of a MarianMT model with tfm's settings (ids in the exported order)."""
    return {
        "architectures": ["MarianMTModel"],
        "model_type": "marian",
        "vocab_size": src_vocab_size,
        "decoder_vocab_size": tgt_vocab_size,
        "d_model": cfg.d_model,
        "encoder_layers": cfg.n_encoder_layers,
        "decoder_layers": cfg.n_decoder_layers,
        "encoder_attention_heads": cfg.n_heads,
        "decoder_attention_heads": cfg.n_heads,
        "encoder_ffn_dim": cfg.d_ff,
        "decoder_ffn_dim": cfg.d_ff,
        "activation_function": _HF_ACTIVATION[cfg.activation],
        "dropout": cfg.dropout,
        "attention_dropout": cfg.attention_dropout,
        "activation_dropout": cfg.activation_dropout,
        "max_position_embeddings": cfg.max_len,
        "scale_embedding": cfg.scale_embeddings,
        "share_encoder_decoder_embeddings": cfg.share_embeddings,
        "tie_word_embeddings": cfg.tie_output,
        "pad_token_id": pad,
        "eos_token_id": eos,
        "forced_eos_token_id": eos,
        "decoder_start_token_id": start,
        "bos_token_id": None,
        "is_encoder_decoder": True,
        "encoder_layerdrop": 0.0,
        "decoder_layerdrop": 0.0,
        "use_cache": True,
    }


# --------------------------------------------------------------------------- weights


def _layers(side: str, n: int, table: list[tuple[str, str]]) -> Iterator[tuple[str, str]]:
    for i in range(n):
        for tfm, hf in table:
            for kind in ("weight", "bias"):
                yield f"{side}.layers.{i}.{tfm}.{kind}", f"model.{side}.layers.{i}.{hf}.{kind}"


def to_tfm(hf: dict[str, Tensor], cfg: TransformerConfig) -> dict[str, Tensor]:
    """A MarianMT state dict (tied weights stored once, as transformers saves them) as tfm's."""
    out: dict[str, Tensor] = {}
    for side, n, table in (("encoder", cfg.n_encoder_layers, _ENCODER), ("decoder", cfg.n_decoder_layers, _DECODER)):
        for tfm, name in _layers(side, n, table):
            out[tfm] = hf[name]
        for i in range(n):
            for tfm, attn in _FUSED[side]:
                hf_attn = f"model.{side}.layers.{i}.{attn}"
                for kind in ("weight", "bias"):
                    out[f"{side}.layers.{i}.{tfm}.{kind}"] = torch.cat(
                        [hf[f"{hf_attn}.k_proj.{kind}"], hf[f"{hf_attn}.v_proj.{kind}"]]
                    )
    shared = hf.get("model.shared.weight")  # older files also hold the per-side names
    source = hf.get("model.encoder.embed_tokens.weight", shared)
    target = hf.get("model.decoder.embed_tokens.weight", shared)
    if cfg.share_embeddings and shared is not None:
        source = target = shared
    if source is None or target is None:
        raise KeyError("model.shared.weight (or model.encoder/decoder.embed_tokens.weight)")
    out["encoder.embed.embedding.weight"] = source
    out["decoder.embed.embedding.weight"] = target
    out["generator.weight"] = target if cfg.tie_output else hf["lm_head.weight"]
    if cfg.output_bias:
        out["generator.bias"] = hf["final_logits_bias"].reshape(-1)
    return out


def to_hf(tfm: dict[str, Tensor], cfg: TransformerConfig) -> dict[str, Tensor]:
    """tfm's state dict as a MarianMT one, tied weights stored once (as transformers saves them)."""
    out: dict[str, Tensor] = {}
    for side, n, table in (("encoder", cfg.n_encoder_layers, _ENCODER), ("decoder", cfg.n_decoder_layers, _DECODER)):
        for name, hf in _layers(side, n, table):
            out[hf] = tfm[name]
        for i in range(n):
            for name, attn in _FUSED[side]:
                for kind in ("weight", "bias"):
                    k, v = tfm[f"{side}.layers.{i}.{name}.{kind}"].chunk(2)
                    out[f"model.{side}.layers.{i}.{attn}.k_proj.{kind}"] = k
                    out[f"model.{side}.layers.{i}.{attn}.v_proj.{kind}"] = v
    if cfg.share_embeddings:
        out["model.shared.weight"] = tfm["encoder.embed.embedding.weight"]
    else:
        out["model.encoder.embed_tokens.weight"] = tfm["encoder.embed.embedding.weight"]
        out["model.decoder.embed_tokens.weight"] = tfm["decoder.embed.embedding.weight"]
    if not cfg.tie_output:
        out["lm_head.weight"] = tfm["generator.weight"]
    vocab = tfm["generator.weight"].size(0)
    bias = tfm.get("generator.bias")
    out["final_logits_bias"] = (bias if bias is not None else torch.zeros(vocab)).reshape(1, vocab)
    return {k: v.detach().clone().contiguous() for k, v in out.items()}


# --------------------------------------------------------------------------- reorderings


def vocab_order(size: int, pad: int) -> list[int]:
    """tfm ids in the exported order: every id but `<pad>`'s, then `<pad>` (last, as Marian
    keeps it). The identity for a vocabulary that already ends with it."""
    return [i for i in range(size) if i != pad] + [pad]


def reorder_vocab(hf: dict[str, Tensor], src_order: list[int], tgt_order: list[int]) -> dict[str, Tensor]:
    """Rows of the vocabulary-sized weights in the exported id order."""
    out = dict(hf)
    rows = {
        "model.shared.weight": src_order,
        "model.encoder.embed_tokens.weight": src_order,
        "model.decoder.embed_tokens.weight": tgt_order,
        "lm_head.weight": tgt_order,
    }
    for name, order in rows.items():
        if name in out:
            out[name] = out[name][order]
    out["final_logits_bias"] = out["final_logits_bias"][:, tgt_order]
    return out


def feature_order(d_model: int) -> Tensor:
    """For each feature of the halves layout, the interleaved feature holding the same value:
    sin of frequency i is feature i in halves and 2i interleaved; its cos d/2 + i and 2i + 1."""
    half = torch.arange(d_model // 2)
    return torch.cat([2 * half, 2 * half + 1])


def permute_features(hf: dict[str, Tensor], order: Tensor) -> dict[str, Tensor]:
    """Every weight of a MarianMT state dict with its d_model axis taken in `order` (see
    `feature_order`; its inverse, `order.argsort()`, undoes it)."""
    out = {}
    for name, w in hf.items():
        if name.endswith(
            (
                "q_proj.weight",
                "k_proj.weight",
                "v_proj.weight",
                "fc1.weight",
                "shared.weight",
                "embed_tokens.weight",
                "lm_head.weight",
            )
        ):
            w = w[:, order]  # reads the residual stream
        elif name.endswith(("out_proj.weight", "fc2.weight")):
            w = w[order]  # writes it
        elif name.endswith(("out_proj.bias", "fc2.bias", "layer_norm.weight", "layer_norm.bias")):
            w = w[order]
        out[name] = w.contiguous()
    return out
