"""The encoder-decoder Transformer (paper §3, Figure 1) with an incremental decoding API."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, cast

import torch
from torch import Tensor, nn

from ..contracts.tokenizer import SpecialIds
from ..tokenizers.vocab import TFM_IDS
from .attention import padding_mask
from .layers import (
    DecoderLayer,
    Dropout,
    EncoderLayer,
    LayerCache,
    LearnedPositionalEmbedding,
    SinusoidalPositionalEncoding,
    TokenEmbedding,
)
from .transformer_config import TransformerConfig


def _positions(cfg: TransformerConfig) -> nn.Module:
    if cfg.positional == "learned":
        return LearnedPositionalEmbedding(cfg.d_model, cfg.max_len)
    return SinusoidalPositionalEncoding(cfg.d_model, cfg.max_len, cfg.sinusoid_layout)


def _layer_args(cfg: TransformerConfig) -> dict[str, Any]:
    return dict(
        d_model=cfg.d_model,
        n_heads=cfg.n_heads,
        d_ff=cfg.d_ff,
        dropout=cfg.dropout,
        attention_dropout=cfg.attention_dropout,
        activation=cfg.activation,
        activation_dropout=cfg.activation_dropout,
        pre_norm=cfg.norm == "pre",
    )


@dataclass
class DecoderState:
    """What incremental decoding carries from one step to the next."""

    src_mask: Tensor  # [batch, 1, 1, src_len]
    layers: list[LayerCache]
    position: int  # index of the next target position

    def reorder(self, index: Tensor) -> DecoderState:
        """Keep/duplicate batch rows (beam search): index is [new_batch] into the batch."""
        return DecoderState(
            self.src_mask.index_select(0, index), [c.reorder(index) for c in self.layers], self.position
        )


class Encoder(nn.Module):
    """Embedding + positions, then N EncoderLayers (+ a final LayerNorm with pre-norm)."""

    def __init__(self, cfg: TransformerConfig, embed: TokenEmbedding):
        super().__init__()
        self.embed = embed
        self.positions = _positions(cfg)
        self.dropout = Dropout(cfg.dropout)
        self.layers = nn.ModuleList(EncoderLayer(**_layer_args(cfg)) for _ in range(cfg.n_encoder_layers))
        self.final_norm = nn.LayerNorm(cfg.d_model) if cfg.norm == "pre" else nn.Identity()

    @property
    def stack(self) -> Sequence[EncoderLayer]:
        """The N layers, typed (an nn.ModuleList yields plain modules)."""
        return cast("Sequence[EncoderLayer]", self.layers)

    def forward(self, src: Tensor, src_mask: Tensor) -> Tensor:
        """src: [batch, src_len] ids -> memory [batch, src_len, d_model]."""
        x = self.dropout(self.embed(src) + self.positions(0, src.size(1)))
        for layer in self.stack:
            x = layer(x, src_mask)
        return cast(Tensor, self.final_norm(x))


class Decoder(nn.Module):
    """Embedding + positions, then N DecoderLayers (+ a final LayerNorm with pre-norm)."""

    def __init__(self, cfg: TransformerConfig, embed: TokenEmbedding):
        super().__init__()
        self.embed = embed
        self.positions = _positions(cfg)
        self.dropout = Dropout(cfg.dropout)
        self.layers = nn.ModuleList(DecoderLayer(**_layer_args(cfg)) for _ in range(cfg.n_decoder_layers))
        self.final_norm = nn.LayerNorm(cfg.d_model) if cfg.norm == "pre" else nn.Identity()

    @property
    def stack(self) -> Sequence[DecoderLayer]:
        """The N layers, typed (an nn.ModuleList yields plain modules)."""
        return cast("Sequence[DecoderLayer]", self.layers)

    def forward(
        self, tgt_in: Tensor, memory: Tensor, src_mask: Tensor, need_weights: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        """tgt_in: [batch, tgt_len] -> ([batch, tgt_len, d_model], last layer's cross-attention
        weights [batch, heads, tgt_len, src_len] when `need_weights`)."""
        x = self.dropout(self.embed(tgt_in) + self.positions(0, tgt_in.size(1)))
        weights = None
        for i, layer in enumerate(self.stack):
            x, weights = layer(x, memory, src_mask, need_weights and i == len(self.stack) - 1)
        return self.final_norm(x), weights

    def step(self, tokens: Tensor, state: DecoderState) -> tuple[Tensor, DecoderState]:
        """tokens: [batch] (the last output) -> ([batch, d_model], state one position on)."""
        x = self.dropout(self.embed(tokens[:, None]) + self.positions(state.position, 1))
        caches = []
        for layer, cache in zip(self.stack, state.layers):
            x, cache = layer.step(x, state.src_mask, cache)
            caches.append(cache)
        return self.final_norm(x)[:, 0], DecoderState(state.src_mask, caches, state.position + 1)


class Seq2SeqTransformer(nn.Module):
    """Encoder, decoder and the output projection ("generator") to target-vocabulary logits.

    `share_embeddings` uses one embedding matrix for source and target (joint vocabulary);
    `tie_output` reuses the target embedding as the output projection (paper §3.4).
    """

    ARCHITECTURE: ClassVar[str] = "transformer"  # the name checkpoints record (model/builders.py)

    def __init__(
        self,
        cfg: TransformerConfig,
        src_vocab_size: int,
        tgt_vocab_size: int,
        src_ids: SpecialIds = TFM_IDS,
        tgt_ids: SpecialIds = TFM_IDS,
    ):
        """`src_ids`/`tgt_ids`: the vocabularies' special ids (the tokenizers' `ids`): the
        source's `<pad>` is masked, the search starts from the target's `<sos>` and ends at
        its `<eos>`."""
        super().__init__()
        self.config = cfg
        self.src_vocab_size, self.tgt_vocab_size = src_vocab_size, tgt_vocab_size
        self.src_ids, self.tgt_ids = src_ids, tgt_ids
        src_embed = TokenEmbedding(src_vocab_size, cfg.d_model, cfg.scale_embeddings)
        tgt_embed = (
            src_embed if cfg.share_embeddings else TokenEmbedding(tgt_vocab_size, cfg.d_model, cfg.scale_embeddings)
        )
        self.encoder = Encoder(cfg, src_embed)
        self.decoder = Decoder(cfg, tgt_embed)
        self.generator = nn.Linear(cfg.d_model, tgt_vocab_size, bias=cfg.output_bias)
        for p in self.parameters():  # Xavier-uniform, as in the notebook
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)
        if self.generator.bias is not None:
            nn.init.zeros_(self.generator.bias)
        if cfg.tie_output:
            self.generator.weight = tgt_embed.weight

    def forward(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        """Teacher forcing. src: [batch, src_len], tgt_in: [batch, tgt_len] -> logits
        [batch, tgt_len, tgt_vocab]."""
        return cast(Tensor, self.generator(self.features(src, tgt_in)))

    def features(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        """Teacher forcing up to the output projection: the decoder's output [batch, tgt_len,
        d_model], what the generator reads (the keys of a near-match datastore)."""
        src_mask = padding_mask(src, self.src_ids.pad)
        hidden, _ = self.decoder(tgt_in, self.encoder(src, src_mask), src_mask)
        return cast(Tensor, hidden)

    def cross_attention(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        """The last decoder layer's attention over the source: [batch, heads, tgt_len, src_len]."""
        src_mask = padding_mask(src, self.src_ids.pad)
        weights: Tensor
        _, weights = self.decoder(tgt_in, self.encoder(src, src_mask), src_mask, need_weights=True)
        return weights

    def start(self, src: Tensor) -> DecoderState:
        """Encode the source and prepare incremental decoding."""
        src_mask = padding_mask(src, self.src_ids.pad)
        memory = self.encoder(src, src_mask)
        return DecoderState(src_mask, [layer.start_cache(memory) for layer in self.decoder.stack], 0)

    def step(self, tokens: Tensor, state: DecoderState) -> tuple[Tensor, DecoderState]:
        """tokens: [batch] -> (log-probabilities of the next token [batch, tgt_vocab], new state)."""
        log_probs, _, state = self.step_features(tokens, state)
        return log_probs, state

    def step_features(self, tokens: Tensor, state: DecoderState) -> tuple[Tensor, Tensor, DecoderState]:
        """`step`, with the decoder's output it projected: (log-probabilities [batch, tgt_vocab],
        features [batch, d_model], new state)."""
        hidden, state = self.decoder.step(tokens, state)
        return torch.log_softmax(self.generator(hidden).float(), dim=-1), hidden, state

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())
