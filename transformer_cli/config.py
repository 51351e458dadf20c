"""Typed configuration: the schema of a config, `Config`: its sections (each a dataclass, every
field with its help, bounds and resumability) plus an optional `name`.

The sections are config_sections.py's (data, tokenizer, decode, serve, export), config_model.py's,
config_train.py's, config_synthetic.py's and config_corrections.py's. Reading
YAML files (`extends:`, `--set`, where each value came from) is config_loading.py; the checks
across keys are config_checks.py; turning values into typed fields is config_values.py.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from .config_checks import validate
from .config_corrections import CorrectionsConfig
from .config_model import ModelConfig, default_model
from .config_sections import (
    DataConfig,
    DecodeConfig,
    ExportConfig,
    ServeConfig,
    SplitsConfig,
    TokenizerConfig,
)
from .config_synthetic import SyntheticConfig
from .config_train import TrainConfig
from .config_values import checks_are_deferred
from .config_values import schema_field as _f
from .config_values import schema_section as _section

# The sections, for everything that reads a config (`from .config import DataConfig`).
__all__ = [
    "Config",
    "CorrectionsConfig",
    "DataConfig",
    "DecodeConfig",
    "ExportConfig",
    "ModelConfig",
    "ServeConfig",
    "SplitsConfig",
    "SyntheticConfig",
    "TokenizerConfig",
    "TrainConfig",
]


@dataclass
class Config:
    name: str = _f("run", "Run name: data/<name>/ and checkpoints/<name>/ (default: the file's stem).")
    plugins: list[str] = _f(
        [],
        "Your modules, imported before the rest of the config is read, "
        "which register entries (architectures, tokenizers, criteria, search "
        "strategies, export formats, corpora, ...; registry.py): module names, "
        "or .py files (relative to the config file).",
    )
    data: DataConfig = _section(DataConfig, "The corpus.")
    tokenizer: TokenizerConfig = _section(TokenizerConfig, "Tokenization.")
    model: ModelConfig = _section(default_model, "The model: its architecture and that architecture's settings.")
    train: TrainConfig = _section(TrainConfig, "Training and publication.")
    decode: DecodeConfig = _section(DecodeConfig, "Translation.")
    synthetic: SyntheticConfig = _section(SyntheticConfig, "Pairs made from monolingual text.")
    serve: ServeConfig = _section(ServeConfig, "The HTTP server.")
    corrections: CorrectionsConfig = _section(CorrectionsConfig, "Users' corrections of translations.")
    export: ExportConfig = _section(ExportConfig, "tfm export.")

    def __post_init__(self) -> None:
        """The checks across keys, as for a config read from YAML (config_checks.validate),
        unless the one building it runs them later (`checks_deferred`)."""
        if checks_are_deferred():
            return
        validate(self)

    @property
    def data_dir(self) -> Path:
        """Where `tfm preprocess` writes this config's encoded corpus."""
        return Path(self.data.dir) / self.name

    @property
    def run_dir(self) -> Path:
        """Where `tfm train` writes this config's run (checkpoints, metrics, logs)."""
        return Path(self.train.out_dir) / self.name

    @property
    def glossary_store(self) -> str | None:
        """The corrections store whose terms this config's translations use: decode.glossary_store,
        else corrections.store (None: none)."""
        return self.decode.glossary_store or self.corrections.store

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.to_dict(), sort_keys=False)
