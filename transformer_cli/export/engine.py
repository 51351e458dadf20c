"""CTranslate2 as an optional dependency: importing it, and the weight types tfm exports."""

from __future__ import annotations

from types import ModuleType

from ..errors import UsageError

# `tfm export --quantization` choices -> CTranslate2's weight type ("none" keeps float32).
QUANTIZATIONS = {"none": "float32", "int8": "int8", "int8_float32": "int8_float32",
                 "int16": "int16", "float16": "float16"}

INSTALL_HINT = "pip install 'tfm[ctranslate2]'"


def import_ctranslate2() -> ModuleType:
    """The `ctranslate2` module, or a one-line UsageError saying how to install it."""
    try:
        import ctranslate2
    except ImportError:
        raise UsageError(f"CTranslate2 is not installed; install it with: {INSTALL_HINT}") from None
    return ctranslate2


def weight_type(quantization: str) -> str:
    """CTranslate2's name for a `--quantization` choice."""
    if quantization not in QUANTIZATIONS:
        raise UsageError(f"--quantization must be one of {', '.join(QUANTIZATIONS)} "
                         f"(got {quantization!r})")
    return QUANTIZATIONS[quantization]
