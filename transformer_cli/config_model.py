"""The `model:` section: ModelConfig, the settings every model family has (model.architecture,
max_len), extended by each architecture's own class (seams.ARCHITECTURES: the entry's
settings), which reads the section. Apart from the other sections (config_sections.py), which
name no registry: an architecture's contract (contracts/model.py) is below the registries, and
the registries below this class, which looks its architecture up in one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from .config_values import ConfigError, Section
from .config_values import schema_field as _f
from .seams import ARCHITECTURES


@dataclass
class ModelConfig(Section):
    """The model: `model.architecture` names its family (seams.ARCHITECTURES), whose settings
    class (this one extended: the Transformer's is model/transformer_config.py) reads the rest
    of the section, so each family has its own keys and checks."""

    SECTION: ClassVar[str] = "model"
    # The settings a run that continues a trained model takes from its config, not from the
    # parent: they shape no weight (the Transformer's dropouts). A family names its own.
    REGULARIZATION: ClassVar[tuple[str, ...]] = ()

    architecture: str = _f(
        "transformer",
        "The model family: transformer, or one a plugin registers "
        "(seams.ARCHITECTURES); the other model.* keys are its settings.",
        added=True,
    )
    max_len: int = _f(256, "Longest sequence in tokens (positions); longer inputs are truncated.", ge=4, le=16384)

    @classmethod
    def section_class(cls, raw: Any) -> type[ModelConfig]:
        """The dataclass a `model:` mapping is read with: its architecture's (config_values.
        build_section); an unknown architecture is a ConfigError listing the known ones."""
        name = raw.get("architecture", "transformer") if isinstance(raw, dict) else "transformer"
        if not isinstance(name, str):
            raise ConfigError(f"model.architecture must be a string (got {name!r})", "model.architecture")
        settings = ARCHITECTURES.settings_of(name)
        if not (isinstance(settings, type) and issubclass(settings, ModelConfig)):
            raise ConfigError(
                f"model.architecture: {name!r} has no settings class extending config.ModelConfig", "model.architecture"
            )
        return settings

    def check(self, cfg: Any) -> None:
        """The architecture's checks across keys, given the whole config (a config.Config; a
        ConfigError holding the keys, the culprit first), run with the config's others
        (config_checks.validate)."""


def default_model() -> ModelConfig:
    return ModelConfig.section_class({})()
