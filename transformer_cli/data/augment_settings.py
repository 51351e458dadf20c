"""The settings of tfm's own training transforms (train.transform_options.source_noise), beside
data/augment.py, which implements them. Imports nothing above the config: a config's options
are read with this class where it is loaded (seams.TRANSFORMS names it by path)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..config_values import ConfigError, Section
from ..config_values import schema_field as _f


@dataclass
class SourceNoiseOptions(Section):
    """train.transform_options.source_noise: shares of training sources changed the way users
    type, drawn per batch and epoch (targets keep theirs)."""

    SECTION: ClassVar[str] = "train.transform_options.source_noise"

    lowercase: float = _f(0.0, "Share of sources lowercased (robustness to lowercase input).", ge=0.0, le=1.0)
    uppercase: float = _f(0.0, "Share of sources written in capitals.", ge=0.0, le=1.0)
    unpunctuated: float = _f(0.0, "Share of sources without their final punctuation.", ge=0.0, le=1.0)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.lowercase + self.uppercase > 1.0:
            raise ConfigError(
                f"{self.SECTION}.lowercase + uppercase must be at most 1",
                f"{self.SECTION}.lowercase",
                f"{self.SECTION}.uppercase",
            )
