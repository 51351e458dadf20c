"""The CTranslate2 export's own settings (export.options with export.format: ctranslate2),
apart from export/engine.py so that reading a config imports neither it nor ctranslate2."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..config_values import ConfigError, Section
from ..config_values import schema_field as _f
from .engine import QUANTIZATIONS


@dataclass
class Ct2Options(Section):
    """export.options of export.format: ctranslate2."""

    SECTION: ClassVar[str] = "export.options"

    quantization: str = _f(
        "none",
        "Weight type (also --quantization): "
        + ", ".join(QUANTIZATIONS)
        + " (none: float32; the 16-bit float types are for GPUs).",
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.quantization not in QUANTIZATIONS:
            raise ConfigError(
                f"export.options.quantization must be one of {', '.join(QUANTIZATIONS)} (got {self.quantization!r})",
                "export.options.quantization",
            )
