"""Models by architecture name. A checkpoint records the name its model was built under
(`Checkpoint.architecture`, the model class's ARCHITECTURE), and `build_model` rebuilds it from
the same name, so another model family is added as one more entry here."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torch import nn

from ..config import ModelConfig
from ..data.vocab import SpecialIds
from ..errors import UsageError
from .transformer import Seq2SeqTransformer

# name -> builder(model config, source and target vocabulary sizes, their special ids)
ARCHITECTURES: dict[str, Callable[[ModelConfig, int, int, SpecialIds, SpecialIds], nn.Module]] = {
    Seq2SeqTransformer.ARCHITECTURE: Seq2SeqTransformer,
}


def build_model(architecture: str, cfg: ModelConfig, src_vocab_size: int, tgt_vocab_size: int,
                src_ids: SpecialIds, tgt_ids: SpecialIds) -> Any:
    """A new model of `architecture` (its weights freshly initialised) for vocabularies of
    these sizes and special ids (the tokenizers')."""
    try:
        builder = ARCHITECTURES[architecture]
    except KeyError:
        raise UsageError(f"unknown model architecture {architecture!r} (this tfm builds: "
                         f"{', '.join(sorted(ARCHITECTURES))})") from None
    return builder(cfg, src_vocab_size, tgt_vocab_size, src_ids, tgt_ids)

