"""The Transformer's `model:` settings (model.architecture: transformer), beside the model
(model/transformer.py) and without torch, so that a config is read and checked without it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Literal

from ..config import ModelConfig
from ..config_values import ConfigError
from ..config_values import schema_field as _f

if TYPE_CHECKING:
    from ..config import Config


@dataclass
class TransformerConfig(ModelConfig):
    """The encoder-decoder Transformer (Vaswani et al. 2017); names follow the paper."""

    REGULARIZATION: ClassVar[tuple[str, ...]] = ("dropout", "attention_dropout", "activation_dropout")

    d_model: int = _f(256, "Width of embeddings and every layer's output.", ge=8, le=16384)
    n_heads: int = _f(8, "Attention heads (must divide d_model).", ge=1, le=256)
    n_encoder_layers: int = _f(3, "Encoder layers (N in the paper).", ge=1, le=128)
    n_decoder_layers: int = _f(3, "Decoder layers.", ge=1, le=128)
    d_ff: int = _f(512, "Inner width of the position-wise feed-forward network.", ge=1, le=131072)
    dropout: float = _f(0.1, "Dropout on embeddings and sub-layer outputs (P_drop).", ge=0.0, lt=1.0)
    attention_dropout: float = _f(0.0, "Dropout on attention weights.", ge=0.0, lt=1.0)
    activation_dropout: float = _f(0.0, "Dropout inside the feed-forward network.", ge=0.0, lt=1.0)
    activation: Literal["relu", "gelu", "swish"] = _f(
        "relu", "Feed-forward activation (gelu: the exact, erf-based one; swish: SiLU, as opus-mt models use)."
    )
    positional: Literal["learned", "sinusoidal"] = _f(
        "sinusoidal", "Positional encodings: the paper's sinusoids or a learned table."
    )
    norm: Literal["post", "pre"] = _f(
        "post",
        "LayerNorm after each residual (the paper) or before each sub-layer (pre-LN, more stable at high rates).",
    )
    tie_output: bool = _f(False, "Output projection shares the target embedding matrix.")
    share_embeddings: bool = _f(False, "Source and target share one embedding matrix (joint vocabulary).")
    scale_embeddings: bool = _f(
        True, "Multiply token embeddings by sqrt(d_model) (paper §3.4; transformers' scale_embedding).", added=True
    )
    output_bias: bool = _f(False, "A bias on the output projection (Marian's final_logits_bias).", added=True)
    sinusoid_layout: Literal["interleaved", "halves"] = _f(
        "interleaved",
        "positional: sinusoidal: the sine and cosine of each frequency side by side "
        "(dimensions 2i, 2i+1: tfm's) or all sines, then all cosines (transformers' Marian).",
        added=True,
    )

    def check(self, cfg: Config) -> None:
        t = cfg.tokenizer
        if self.d_model % self.n_heads:
            raise ConfigError(
                f"model.n_heads={self.n_heads} must divide model.d_model={self.d_model}",
                "model.n_heads",
                "model.d_model",
            )
        if self.positional == "sinusoidal" and self.d_model % 2:
            raise ConfigError(
                f"model.d_model={self.d_model} must be even for sinusoidal positions",
                "model.d_model",
                "model.positional",
            )
        if self.share_embeddings and (t.kind == "spacy" or (t.kind == "sentencepiece" and not t.joint)):
            raise ConfigError(
                "model.share_embeddings needs a joint vocabulary (tokenizer.kind: "
                "sentencepiece with tokenizer.joint: true)",
                "model.share_embeddings",
                "tokenizer.kind",
                "tokenizer.joint",
            )
        if self.positional == "learned" and self.max_len < cfg.data.train_max_len + 2:
            raise ConfigError(
                f"model.max_len={self.max_len} must be >= data.train_max_len + 2 "
                f"= {cfg.data.train_max_len + 2} with learned positions",
                "model.max_len",
                "data.train_max_len",
                "model.positional",
            )
