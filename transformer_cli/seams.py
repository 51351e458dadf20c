"""The open seams: every registry a config chooses from, and tfm's own entries in each, named
by the dotted path of the object that implements them (imported when first used).

A config's names are therefore checked where it is loaded (config_checks), with the known
names listed, without importing torch or the layers that implement them. A registry is
imported from here, by tfm's modules and plugins alike. How an
entry is added from outside (a config's `plugins:`, an installed package's entry point, a
dotted path as the value): registry.py and docs/architecture.md.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias

from .registry import AnyRegistry, Calls, InstanceOf, Registry, SubclassOf

if TYPE_CHECKING:  # for type checkers only, and nothing of a layer: torch, and the modules beside this one
    import random

    import torch
    from torch import Tensor, nn

    from .config_train import TrainConfig
    from .contracts.corpus import NamedText, ParallelCorpus
    from .contracts.engine import Engine
    from .contracts.exporter import Exporter
    from .contracts.model import Architecture
    from .contracts.strategy import SearchStrategy
    from .contracts.tokenizer import Tokenizer

# What a registry's entries are is its type (what `register` takes and a lookup gives), said
# with what stands below this module: the training seams' functions below, and for the others
# their contracts (contracts/: a Tokenizer class, a SearchStrategy, an Exporter, ...), which
# the layers above implement. So no import, type-only ones included, runs back up (farm-studio
# look: no arrow does). What an entry must be is also its `shape` (its contract's class named
# by its dotted path, not imported: registry.py), which a dotted path given as a config's
# value is checked against where the config is loaded.
TFM = "transformer_cli."  # tfm's own modules
OPTIM_SETTINGS = TFM + "training.optim_settings:"  # the settings of tfm's own optimizers and schedules

# model.architecture: an Architecture (tfm's: model/builders.py): a builder and the dataclass
# of the `model:` section it takes, which is the entry's settings: config_model.ModelConfig
# or a subclass, each family its own (hence Any).
ARCHITECTURES: Registry[Architecture[Any]] = Registry(
    "architectures", "model architecture", "model.architecture", shape=InstanceOf(TFM + "contracts.model:Architecture")
)
ARCHITECTURES.register(
    "transformer", TFM + "model.builders:TRANSFORMER", settings=TFM + "model.transformer_config:TransformerConfig"
)

# tokenizer.kind: a Tokenizer subclass (tfm's: tokenizers/); its own keys: tokenizer.options
TOKENIZERS: Registry[type[Tokenizer]] = Registry(
    "tokenizers",
    "tokenizer kind",
    "tokenizer.kind",
    "tokenizer.options",
    shape=SubclassOf(TFM + "contracts.tokenizer:Tokenizer"),
)
TOKENIZERS.register("spacy", TFM + "tokenizers.word:WordTokenizer")
TOKENIZERS.register("sentencepiece", TFM + "tokenizers.subword:SubwordTokenizer")
TOKENIZERS.register("piece-vocab", TFM + "tokenizers.piece_vocab:PieceVocabTokenizer")

# data.corpus: a ParallelCorpus (tfm's: data/sources.py); its own keys: data.corpus_options
CORPORA: Registry[ParallelCorpus] = Registry(
    "corpora",
    "parallel corpus",
    "data.corpus",
    "data.corpus_options",
    shape=InstanceOf(TFM + "contracts.corpus:ParallelCorpus"),
)
CORPORA.register("multi30k", TFM + "data.sources:MULTI30K")
CORPORA.register("files", TFM + "data.sources:FILES")

# synthetic.*.text: a monolingual corpus known by name, a NamedText (tfm's: synthetic/corpora.py);
# the other values are `parallel` (the config's own training side) and files or folders
TEXT_CORPORA: Registry[NamedText] = Registry(
    "text_corpora",
    "monolingual corpus",
    "synthetic.*.text",
    keywords=("parallel",),
    shape=InstanceOf(TFM + "contracts.corpus:NamedText"),
)
TEXT_CORPORA.register("multi30k-task2", TFM + "synthetic.corpora:MULTI30K_TASK2")


class Transform(Protocol):
    """A change to a training pair's text (data/augment.py), drawn from `rng` (the batch's, seeded)."""

    changes_targets: bool  # else the targets' preprocessed ids stand

    def __call__(self, source: str, target: str, rng: random.Random) -> tuple[str, str]: ...


# train.transforms: (config) -> a Transform, or None when its settings do nothing (the config is
# a config.Config, which imports this module: not named here); each one's own keys:
# train.transform_options.<its name>. One imported when the config is loaded (a dotted path, a
# plugin's) is called with it there, and what it makes checked.
MakeTransform: TypeAlias = Callable[[Any], Transform | None]
TRANSFORMS: Registry[MakeTransform] = Registry(
    "transforms",
    "transform",
    "train.transforms",
    "train.transform_options",
    shape=Calls(1),
    makes=Calls(3, ("changes_targets",)),
)
TRANSFORMS.register(
    "source_noise", TFM + "data.augment:source_noise", settings=TFM + "data.augment_settings:SourceNoiseOptions"
)

# train.criterion: (train settings, target pad id) -> a Criterion (training/step.py): (net, batch,
# autocast dtype or None) -> the batch's summed training loss (with gradients) and summed NLL
# (the batch is a data.batching.Batch: data/ imports this module). Its own keys:
# train.criterion_options
Criterion: TypeAlias = "Callable[[nn.Module, Any, torch.dtype | None], tuple[Tensor, Tensor]]"
MakeCriterion: TypeAlias = "Callable[[TrainConfig, int], Criterion]"
CRITERIA: Registry[MakeCriterion] = Registry(
    "criteria", "training criterion", "train.criterion", "train.criterion_options", shape=Calls(2)
)
CRITERIA.register(
    "cross_entropy",
    TFM + "training.step:BatchLoss.from_config",
    settings=TFM + "training.criterion_settings:CrossEntropyOptions",
)

# train.optimizer: (parameter groups, train settings, torch device) -> a torch optimizer (training/optim.py);
# its own keys: train.optimizer_options (read by the entry: OPTIMIZERS.options(name, given)); the
# parameter groups decay the matrices by the settings' weight_decay, where they have one
MakeOptimizer: TypeAlias = "Callable[[list[dict[str, Any]], TrainConfig, torch.device], torch.optim.Optimizer]"
OPTIMIZERS: Registry[MakeOptimizer] = Registry(
    "optimizers", "optimizer", "train.optimizer", "train.optimizer_options", shape=Calls(3)
)
OPTIMIZERS.register("adam", TFM + "training.optim:ADAM", settings=OPTIM_SETTINGS + "AdamOptions")
OPTIMIZERS.register("adamw", TFM + "training.optim:ADAMW", settings=OPTIM_SETTINGS + "AdamOptions")

# train.schedule: (train settings, step) -> the multiplier of train.lr (training/optim.py); its own
# keys: train.schedule_options
Schedule: TypeAlias = "Callable[[TrainConfig, int], float]"
SCHEDULES: Registry[Schedule] = Registry(
    "schedules", "learning-rate schedule", "train.schedule", "train.schedule_options", shape=Calls(2)
)
SCHEDULES.register("constant", TFM + "training.optim:constant", settings=False)
SCHEDULES.register("inverse_sqrt", TFM + "training.optim:inverse_sqrt", settings=OPTIM_SETTINGS + "InverseSqrtOptions")

# decode.strategy: a SearchStrategy (tfm's: inference/strategies.py); its own keys: decode.strategy_options
SEARCH_STRATEGIES: Registry[SearchStrategy] = Registry(
    "search_strategies",
    "search strategy",
    "decode.strategy",
    "decode.strategy_options",
    keywords=("auto",),
    shape=InstanceOf(TFM + "contracts.strategy:SearchStrategy"),
)
SEARCH_STRATEGIES.register("greedy", TFM + "inference.strategies:GREEDY", settings=False)
SEARCH_STRATEGIES.register("beam", TFM + "inference.strategies:BEAM", settings=False)
SEARCH_STRATEGIES.register(
    "sample", TFM + "inference.strategies:SAMPLING", settings=TFM + "inference.strategy_settings:SamplingOptions"
)

# synthetic.back_translation.search: a search strategy too (BACK_TRANSLATION_SEARCH, below); its
# own keys: synthetic.back_translation.search_options

# export.format (tfm export --format): an Exporter (tfm's: export/bundle.py, hf/export.py); its
# keys: export.options
EXPORTERS: Registry[Exporter] = Registry(
    "exporters",
    "export format",
    "export.format",
    "export.options",
    shape=InstanceOf(TFM + "contracts.exporter:Exporter"),
)
EXPORTERS.register("ctranslate2", TFM + "export.bundle:CT2_EXPORTER", settings=TFM + "export.options:Ct2Options")
EXPORTERS.register("hf", TFM + "hf.export:HF_EXPORTER")

# The engine an export's manifest names (a path without a manifest: torch) -> an Engine:
# how api.open_backend opens its folders and, for one whose exports keep trainable weights, how
# model_io.read_model reads them back as a tfm Checkpoint.
ENGINES: Registry[Engine] = Registry("engines", "export engine", shape=InstanceOf(TFM + "contracts.engine:Engine"))
ENGINES.register("torch", TFM + "api:TORCH")
ENGINES.register("transformers", TFM + "api:TRANSFORMERS")  # tfm export --format hf: a MarianMT folder
ENGINES.register("ctranslate2", TFM + "export.ct2_translator:CT2")

# What a config chooses by name, checked when it is loaded (config_checks.check_choices).
CHOSEN_BY_CONFIG: tuple[AnyRegistry, ...] = (
    ARCHITECTURES,
    TOKENIZERS,
    CORPORA,
    TRANSFORMS,
    CRITERIA,
    OPTIMIZERS,
    SCHEDULES,
    SEARCH_STRATEGIES,
    EXPORTERS,
)


@dataclass(frozen=True)
class Choice:
    """A config key that names an entry of `registry`, with the key of that entry's own settings
    (`options_key`): each registry's own (`choices`), and the keys below that choose from one
    too. `aliases`: (value, entry) for other values of the key, each standing for an entry (its
    settings are that entry's; what it adds on top, whoever reads the key does). `also`: other
    keys that hold settings of the same entry (a continued run's schedule_options)."""

    registry: AnyRegistry
    key: str
    options_key: str = ""
    aliases: tuple[tuple[str, str], ...] = ()
    also: tuple[str, ...] = ()

    @property
    def option_keys(self) -> tuple[str, ...]:
        """Every key holding the chosen entry's settings."""
        return (self.options_key, *self.also) if self.options_key else ()

    def entry(self, value: str) -> str:
        """The entry a value of the key stands for: the value itself, or an alias's entry."""
        return dict(self.aliases).get(value, value)

    def check(self, value: str) -> None:
        """Refuse (a ConfigError naming the key) a value that is no entry, keyword or alias."""
        self.registry.check(value, self.key, also=tuple(alias for alias, _ in self.aliases))

    def options(self, value: str, given: Mapping[str, Any] | None) -> Any:
        """The settings of the entry `value` stands for, read from `given` (errors naming the options key)."""
        return self.registry.options(self.entry(value), given, self.options_key)


# Back-translation's search: any search strategy, with options of its own; `noised_beam`
# (config_synthetic.NOISED_BEAM) is beam search, then word noise (synthetic/noise.py).
BACK_TRANSLATION_SEARCH = Choice(
    SEARCH_STRATEGIES,
    "synthetic.back_translation.search",
    "synthetic.back_translation.search_options",
    aliases=(("noised_beam", "beam"),),
)


def choices() -> list[Choice]:
    """Every config key that names a registry's entry, checked when a config is loaded: each
    registry's own (CHOSEN_BY_CONFIG), then the others that choose from one."""
    also = {"schedules": ("train.continued.schedule_options",)}
    return [
        *(Choice(r, r.key, r.options_key, also=also.get(r.kind, ())) for r in CHOSEN_BY_CONFIG),
        BACK_TRANSLATION_SEARCH,
    ]
