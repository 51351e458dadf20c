"""Choosing the device and the autocast precision."""

from __future__ import annotations

import contextlib

import torch

from .errors import UsageError


def resolve_device(name: str) -> torch.device:
    """'auto' picks cuda, then mps, then cpu; an explicit device must exist."""
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise UsageError("--device cuda: no CUDA GPU is visible to torch")
    if name == "mps" and not torch.backends.mps.is_available():
        raise UsageError("--device mps: Apple MPS is not available")
    return torch.device(name)


def cpu_has_fast_bf16() -> bool:
    """True where the CPU multiplies bf16 natively (AVX512-BF16 or AMX), not by emulation."""
    checks = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
    return any(getattr(torch.cpu, name, lambda: False)() for name in checks)


def autocast_dtype(device: torch.device, precision: str) -> torch.dtype | None:
    """The autocast dtype for `precision` ('auto', 'bf16', 'fp32') on `device`; None = fp32."""
    if precision == "fp32":
        return None
    if device.type == "cuda":
        supported = torch.cuda.is_bf16_supported()
    elif device.type == "cpu":
        supported = cpu_has_fast_bf16() or precision == "bf16"
    else:
        supported = False
    if precision == "bf16" and not supported:
        raise UsageError(f"precision bf16 is not supported on {device.type}")
    return torch.bfloat16 if supported else None


def autocast(device: torch.device, dtype: torch.dtype | None):
    """Mixed-precision context for forward passes (a no-op for fp32)."""
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=dtype)
