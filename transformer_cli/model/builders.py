"""Model families by architecture name (`model.architecture`), each a builder and the
dataclass of its `model:` settings (a contracts.model.Architecture). A checkpoint records the
name its model was built under (`Checkpoint.architecture`) and `build_model` rebuilds it from
the same name, so another family is one `register_architecture` call (in a user's module
named by the config's `plugins:`, or a package's `tfm.architectures` entry point);
tests/test_plugins.py adds one from outside the package.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from ..config import ModelConfig
from ..contracts.model import Architecture, TranslationModel
from ..contracts.tokenizer import SpecialIds
from ..seams import ARCHITECTURES
from .transformer import Seq2SeqTransformer
from .transformer_config import TransformerConfig

Settings = TypeVar("Settings", bound=ModelConfig)

TRANSFORMER = Architecture(Seq2SeqTransformer, TransformerConfig)  # seams.py names it


def register_architecture(
    name: str,
    build: Callable[[Settings, int, int, SpecialIds, SpecialIds], TranslationModel[Any]],
    settings: type[Settings],
    replace: bool = False,
) -> Architecture[Settings]:
    """Make `name` a value of model.architecture: `build` makes its models from `settings`
    (config.ModelConfig extended with the family's own keys and checks, which configs then
    give in `model:`). A name already registered is refused unless `replace`."""
    if not (isinstance(settings, type) and issubclass(settings, ModelConfig)):
        raise TypeError(f"the settings of architecture {name!r} must extend config.ModelConfig")
    architecture = Architecture(build, settings)
    ARCHITECTURES.register(name, architecture, settings=settings, replace=replace)
    return architecture


def build_model(
    architecture: str,
    cfg: ModelConfig,
    src_vocab_size: int,
    tgt_vocab_size: int,
    src_ids: SpecialIds,
    tgt_ids: SpecialIds,
) -> TranslationModel[Any]:
    """A new model of `architecture` (its weights freshly initialised) for vocabularies of
    these sizes and special ids (the tokenizers')."""
    return ARCHITECTURES[architecture].build(cfg, src_vocab_size, tgt_vocab_size, src_ids, tgt_ids)
