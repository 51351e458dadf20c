"""CTranslate2 as an optional dependency: importing it, the weight types tfm exports, and
the file that makes a folder a CTranslate2 model."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

from ..errors import UsageError
from ..extras import import_extra

# `tfm export --quantization` choices -> CTranslate2's weight type ("none" keeps float32). The
# 16-bit float types are for GPUs: a CPU computes them in float32 (CTranslate2 warns).
QUANTIZATIONS = {
    "none": "float32",
    "int8": "int8",
    "int8_float32": "int8_float32",
    "int16": "int16",
    "float16": "float16",
    "int8_float16": "int8_float16",
    "bfloat16": "bfloat16",
    "int8_bfloat16": "int8_bfloat16",
}


def is_ct2_model_folder(path: Path) -> bool:
    """Whether `path` holds a CTranslate2 model (its model.bin), with or without tfm's manifest."""
    return (Path(path) / "model.bin").is_file()


def import_ctranslate2(needed_by: str) -> ModuleType:
    """The `ctranslate2` module, or a one-line UsageError saying that `needed_by` needs the
    ctranslate2 extra and how to install it."""
    return import_extra("ctranslate2", needed_by)


def weight_type(quantization: str) -> str:
    """CTranslate2's name for a `--quantization` choice."""
    if quantization not in QUANTIZATIONS:
        raise UsageError(f"--quantization must be one of {', '.join(QUANTIZATIONS)} (got {quantization!r})")
    return QUANTIZATIONS[quantization]
