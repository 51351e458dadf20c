"""Model families by architecture name (`model.architecture`), each a builder and the
dataclass of its `model:` settings. A checkpoint records the name its model was built under
(`Checkpoint.architecture`, the model's ARCHITECTURE) and `build_model` rebuilds it from the
same name, so another family is one `register_architecture` call (in tfm, a user's module, or
a package's `tfm.architectures` entry point); tests/model/test_builders.py adds one from
outside the package.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..config import MODEL_SETTINGS, ModelConfig
from ..data.vocab import SpecialIds
from ..registry import Registry
from .contract import TranslationModel
from .transformer import Seq2SeqTransformer

# builder(its model settings, source and target vocabulary sizes, their special ids) -> model
Builder = Callable[[Any, int, int, SpecialIds, SpecialIds], TranslationModel]


@dataclass(frozen=True)
class Architecture:
    """A registered model family."""

    build: Builder
    settings: type[ModelConfig]  # the dataclass a config's `model:` section becomes


ARCHITECTURES: Registry[Architecture] = Registry("architectures", "model architecture", "model.architecture")


def register_architecture(name: str, build: Builder, settings: type[ModelConfig] = ModelConfig) -> None:
    """Make `name` a value of model.architecture: `build` makes its models from `settings`
    (ModelConfig or a subclass adding the family's own keys, which configs may then give)."""
    ARCHITECTURES.register(name, Architecture(build, settings))
    MODEL_SETTINGS[name] = settings


register_architecture(Seq2SeqTransformer.ARCHITECTURE, Seq2SeqTransformer)


def build_model(architecture: str, cfg: ModelConfig, src_vocab_size: int, tgt_vocab_size: int,
                src_ids: SpecialIds, tgt_ids: SpecialIds) -> TranslationModel:
    """A new model of `architecture` (its weights freshly initialised) for vocabularies of
    these sizes and special ids (the tokenizers')."""
    return ARCHITECTURES[architecture].build(cfg, src_vocab_size, tgt_vocab_size, src_ids, tgt_ids)
