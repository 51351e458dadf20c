"""A tfm `Seq2SeqTransformer` as CTranslate2's `TransformerSpec`, through CTranslate2's public
Python API (`ctranslate2.specs`), weight by weight:

    tfm                                              CTranslate2 spec
    TokenEmbedding.embedding.weight                  {encoder,decoder}/embeddings/weight
    TokenEmbedding.scale (√d_model, as a float)      {encoder,decoder}/scale_embeddings
    positions(0, max_positions), written out               {encoder,decoder}/position_encodings/encodings
    self_attn.q_proj ‖ self_attn.kv_proj (q, k, v)   layer_N/self_attention/linear_0 (fused QKV)
    cross_attn.q_proj, cross_attn.kv_proj (k, v)     layer_N/attention/linear_0, linear_1 (fused KV)
    self_attn.out_proj, cross_attn.out_proj          layer_N/self_attention/linear_1, attention/linear_2
    feed_forward.w_1, w_2                            layer_N/ffn/linear_0, linear_1
    ResidualNorm.norm of each sublayer               that sublayer's layer_norm (pre_norm flag:
                                                     before the sublayer, or after the residual)
    final_norm (pre-norm only)                       {encoder,decoder}/layer_norm
    generator                                        decoder/projection

The positional table is always written out: tfm's sinusoid interleaves sin and cos
(dimension 2i is sin, 2i+1 is cos), while CTranslate2's built-in one puts all sines first.
Shared and tied matrices are written under each name; CTranslate2 stores them once (aliases).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from ..contracts.model import TranslationModel
from ..contracts.tokenizer import Tokenizer
from ..errors import UsageError
from ..model.attention import MultiHeadAttention
from ..model.layers import PositionwiseFeedForward
from ..model.transformer import Decoder, Encoder, Seq2SeqTransformer
from ..model.transformer_config import TransformerConfig
from ..records import field_default
from ..tokenizers.pair import TokenizerPair

# CTranslate2's activation for each tfm one (tfm's gelu is the exact, erf-based GELU).
_ACTIVATIONS = {"relu": "RELU", "gelu": "GELU", "swish": "SWISH"}
_NORMS = ("pre", "post")
_POSITIONALS = ("sinusoidal", "learned")  # absolute tables: both are written out row by row
ARCHITECTURES = (Seq2SeqTransformer.ARCHITECTURE,)  # what this converter converts
# TransformerConfig fields that only matter in training, and those the spec expresses. A field
# outside both (a model option added later) is refused unless it has its default value, so
# an option the exporter does not know is never silently dropped.
_TRAINING_ONLY = {"dropout", "attention_dropout", "activation_dropout"}
_EXPRESSED = {
    "d_model",
    "n_heads",
    "n_encoder_layers",
    "n_decoder_layers",
    "d_ff",
    "activation",
    "positional",
    "max_len",
    "norm",
    "tie_output",
    "share_embeddings",
    "architecture",
    "scale_embeddings",
    "output_bias",
    "sinusoid_layout",
}


def refusals(architecture: str, cfg: TransformerConfig) -> list[str]:
    """Every reason a model of `architecture` with these settings cannot be exported to
    CTranslate2 (none: it can)."""
    if architecture not in ARCHITECTURES:
        return [
            f"model.architecture={architecture!r} is not one the CTranslate2 exporter "
            f"converts ({', '.join(ARCHITECTURES)})"
        ]
    found = [
        f"model.{f.name}={getattr(cfg, f.name)!r} is not known to the CTranslate2 exporter "
        "of this tfm version, so the export could not reproduce it"
        for f in dataclasses.fields(cfg)
        if f.name not in _TRAINING_ONLY | _EXPRESSED and getattr(cfg, f.name) != field_default(f)
    ]
    for key, value, known in (
        ("activation", cfg.activation, _ACTIVATIONS),
        ("norm", cfg.norm, _NORMS),
        ("positional", cfg.positional, _POSITIONALS),
    ):
        if value not in known:
            found.append(f"model.{key}={value!r} has no CTranslate2 equivalent")
    return found


def vocabulary(tokenizer: Tokenizer, side: str) -> list[str]:
    """The tokenizer's id -> token table, checked to be usable as a CTranslate2 vocabulary
    (CTranslate2 maps tokens by their text, so every token must be distinct)."""
    tokens = tokenizer.id_to_token(range(tokenizer.vocab_size))
    seen: set[str] = set()
    for i, token in enumerate(tokens):
        if token in seen:
            raise UsageError(
                f"cannot export: the {side} vocabulary holds {token!r} twice "
                f"(again at id {i}); CTranslate2 maps tokens by their text"
            )
        seen.add(token)
    return tokens


def special_tokens(tokenizers: TokenizerPair) -> tuple[str, str, str]:
    """The text of `<unk>`, `<sos>` and `<eos>` (found at the tokenizers' special ids).
    CTranslate2 names one set of special tokens for both sides, by their text."""

    def named(t: Tokenizer) -> tuple[str, str, str]:
        unk, sos, eos = t.id_to_token([t.ids.unk, t.ids.sos, t.ids.eos])
        return unk, sos, eos

    src, tgt = named(tokenizers.src), named(tokenizers.tgt)
    if src != tgt:
        raise UsageError(
            f"cannot export: the source vocabulary names its special tokens {src}, "
            f"the target {tgt}; CTranslate2 takes one set for both"
        )
    return src


def _linear(spec: Any, *layers: nn.Linear) -> None:
    """A LinearSpec from one layer, or several fused: their output rows stacked in order."""
    spec.weight = torch.cat([layer.weight for layer in layers])
    if layers[0].bias is not None:
        spec.bias = torch.cat([layer.bias for layer in layers])


def _norm(spec: Any, norm: nn.LayerNorm) -> None:
    spec.gamma = norm.weight
    spec.beta = norm.bias


def _attention(spec: Any, attn: MultiHeadAttention, norm: nn.LayerNorm, self_attention: bool) -> None:
    if self_attention:  # [3·d, d]: q, then kv_proj's k and v (the order kv_proj.chunk(2) splits)
        _linear(spec.linear[0], attn.q_proj, attn.kv_proj)
    else:  # queries from the decoder, keys and values (fused) from the encoder output
        _linear(spec.linear[0], attn.q_proj)
        _linear(spec.linear[1], attn.kv_proj)
    _linear(spec.linear[-1], attn.out_proj)
    _norm(spec.layer_norm, norm)


def _feed_forward(spec: Any, ff: PositionwiseFeedForward, norm: nn.LayerNorm) -> None:
    _linear(spec.linear_0, ff.w_1)
    _linear(spec.linear_1, ff.w_2)
    _norm(spec.layer_norm, norm)


def _inputs(spec: Any, embeddings_spec: Any, stack: Encoder | Decoder, max_positions: int) -> None:
    """Token embeddings, their scale and the positional table [max_positions, d_model]."""
    embeddings_spec.weight = stack.embed.weight
    spec.scale_embeddings = float(stack.embed.scale)
    spec.position_encodings.encodings = stack.positions(0, max_positions).detach().clone()
    if not isinstance(stack.final_norm, nn.Identity):
        _norm(spec.layer_norm, stack.final_norm)


def _encoder(spec: Any, encoder: Encoder, max_positions: int) -> None:
    _inputs(spec, spec.embeddings[0], encoder, max_positions)
    for layer_spec, layer in zip(spec.layer, encoder.stack):
        _attention(layer_spec.self_attention, layer.self_attn, layer.attn_block.norm, True)
        _feed_forward(layer_spec.ffn, layer.feed_forward, layer.ff_block.norm)


def _decoder(spec: Any, decoder: Decoder, generator: nn.Linear, max_positions: int) -> None:
    _inputs(spec, spec.embeddings, decoder, max_positions)
    for layer_spec, layer in zip(spec.layer, decoder.stack):
        _attention(layer_spec.self_attention, layer.self_attn, layer.self_block.norm, True)
        _attention(layer_spec.attention, layer.cross_attn, layer.cross_block.norm, False)
        _feed_forward(layer_spec.ffn, layer.feed_forward, layer.ff_block.norm)
    _linear(spec.projection, generator)  # with its bias when model.output_bias is on


def build_spec(model: TranslationModel[Any], tokenizers: TokenizerPair) -> Any:
    """A validated `ctranslate2.specs.TransformerSpec` holding `model`'s weights (not yet
    quantized or saved). Raises UsageError with a one-line reason for what CT2 cannot express."""
    from ctranslate2.specs import common_spec, transformer_spec

    cfg = model.config
    reasons = refusals(model.ARCHITECTURE, cfg)
    if reasons:
        raise UsageError(f"cannot export: {'; '.join(reasons)}")
    assert isinstance(model, Seq2SeqTransformer)  # the one architecture refusals() lets through
    src_tokens = vocabulary(tokenizers.src, "source")
    tgt_tokens = vocabulary(tokenizers.tgt, "target")
    spec = transformer_spec.TransformerSpec.from_config(
        (cfg.n_encoder_layers, cfg.n_decoder_layers),
        cfg.n_heads,
        pre_norm=cfg.norm == "pre",
        activation=common_spec.Activation[_ACTIVATIONS[cfg.activation]],
        alignment_layer=-1,
        alignment_heads=0,
    )  # attention returned: last layer, all heads averaged
    with torch.no_grad():
        _encoder(spec.encoder, model.encoder, cfg.max_len)
        _decoder(spec.decoder, model.decoder, model.generator, cfg.max_len)
    spec.register_source_vocabulary(src_tokens)
    spec.register_target_vocabulary(tgt_tokens)
    c = spec.config
    c.unk_token, c.bos_token, c.eos_token = special_tokens(tokenizers)
    c.decoder_start_token = c.bos_token  # tfm's decoder starts from <sos>...
    c.add_source_eos = True  # ...and reads the source followed by <eos>
    c.layer_norm_epsilon = _layer_norm_eps(model)
    spec.validate()
    return spec


def _layer_norm_eps(model: nn.Module) -> float:
    """The epsilon every LayerNorm of the model uses (CTranslate2 takes one for all)."""
    eps: Sequence[float] = sorted({m.eps for m in model.modules() if isinstance(m, nn.LayerNorm)})
    if len(eps) != 1:
        raise UsageError(f"cannot export: the model's LayerNorms use several epsilons {eps}; CTranslate2 takes one")
    return float(eps[0])
