"""CTranslate2 as an optional dependency: importing it, the weight types tfm exports, and
the file that makes a folder a CTranslate2 model."""

from __future__ import annotations

import os
import platform
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


def _cpu_info() -> tuple[str, set[str]]:
    """The CPU's vendor and feature flags, from /proc/cpuinfo ("" and none elsewhere)."""
    vendor, flags = "", set()
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "vendor_id":
                vendor = value.strip()
            elif key.strip() == "flags":
                flags = set(value.split())
                break
    except OSError:
        pass
    return vendor, flags


def int8_loses_accuracy_here() -> bool:
    """Whether CTranslate2's int8 matrix products on this CPU are its oneDNN ones without VNNI.

    CTranslate2 uses Intel MKL on Intel CPUs and oneDNN elsewhere (unless CT2_USE_MKL says
    otherwise). oneDNN's u8·s8 kernels on an x86 CPU without VNNI sum pairs of products in
    16 bits, which saturate: a small int8 export lost 12.7 BLEU (77.2 -> 64.5) on an AMD EPYC
    with AVX2 only, and none with CT2_USE_MKL=1 or on CPUs with VNNI (docs/results.md)."""
    if platform.machine() not in ("x86_64", "AMD64"):
        return False
    vendor, flags = _cpu_info()
    if flags & {"avx512_vnni", "avx_vnni"}:
        return False
    uses_mkl = os.environ.get("CT2_USE_MKL", "1" if vendor == "GenuineIntel" else "0") == "1"
    return not uses_mkl


INT8_WARNING = (
    "warning: int8 weights on this CPU (x86 without VNNI, CTranslate2's oneDNN "
    "kernels) lose accuracy: prefer --quantization none (float32), or run with "
    "CT2_USE_MKL=1 (slower)"
)
