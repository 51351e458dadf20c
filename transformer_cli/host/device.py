"""Choosing the device, the autocast precision and the CPU threads; a device's RNG state."""

from __future__ import annotations

import contextlib
from typing import Any

import torch

from ..errors import UsageError


def resolve_device(name: str) -> torch.device:
    """'auto' picks cuda, then mps, then cpu; an explicit device must exist. A CUDA device is
    readied for tfm's shapes first (`ready_cuda`)."""
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        raise UsageError("--device cuda: no CUDA GPU is visible to torch")
    if name == "mps" and not torch.backends.mps.is_available():
        raise UsageError("--device mps: Apple MPS is not available")
    device = torch.device(name)
    if device.type == "cuda":
        ready_cuda()
    return device


def ready_cuda() -> None:
    """Turn off cuDNN's kernels for scaled_dot_product_attention, leaving flash, memory-efficient
    and math. cuDNN builds an execution graph for each new (batch, heads, lengths) shape, which
    takes hundreds of milliseconds, and tfm's token-budget batches and step-by-step decoding come
    in hundreds of shapes: on an H200, base.yaml trained at the 2-core CPU's speed with it
    (docs/results.md, "On a GPU")."""
    torch.backends.cuda.enable_cudnn_sdp(False)


def cpu_has_fast_bf16() -> bool:
    """True where the CPU multiplies bf16 natively (AVX512-BF16 or AMX), not by emulation."""
    checks = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
    return any(getattr(torch.cpu, name, lambda: False)() for name in checks)


def cuda_has_native_bf16(device: torch.device) -> bool:
    """True on GPUs that compute bf16 in hardware (compute capability 8.0+, Ampere on). Older
    GPUs (T4, V100) report bf16 support through emulation, which is slower than fp32."""
    try:
        native = torch.cuda.is_bf16_supported(including_emulation=False)
    except TypeError:  # torch before 2.3 has no including_emulation
        native = torch.cuda.is_bf16_supported()
    return native and torch.cuda.get_device_capability(device) >= (8, 0)


def autocast_dtype(device: torch.device, precision: str) -> torch.dtype | None:
    """The autocast dtype for `precision` on `device`; None = fp32.

    auto: bf16 where the hardware does it natively (Ampere+ GPUs, AVX512-BF16/AMX CPUs),
    fp16 on older CUDA GPUs (training pairs it with a GradScaler), fp32 elsewhere.
    """
    if precision == "fp32":
        return None
    if precision == "fp16":
        return torch.float16
    if device.type == "cuda":
        if cuda_has_native_bf16(device):
            return torch.bfloat16
        if precision == "bf16":
            raise UsageError("precision bf16 is not supported natively on this GPU: use fp16 or auto")
        return torch.float16
    if device.type == "cpu":
        return torch.bfloat16 if precision == "bf16" or cpu_has_fast_bf16() else None
    if precision == "bf16":
        raise UsageError(f"precision bf16 is not supported on {device.type}")
    return None


def autocast(device: torch.device, dtype: torch.dtype | None) -> contextlib.AbstractContextManager[Any]:
    """Mixed-precision context for forward passes (a no-op for fp32)."""
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=dtype)


def rng_state(device: torch.device) -> dict[str, Any]:
    """The CPU generator's state, and the GPU's when `device` is one (plain tensors)."""
    state = {"cpu": torch.get_rng_state()}
    if device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(device)
    return state


def set_rng_state(state: dict[str, Any], device: torch.device) -> None:
    """Restore what `rng_state` returned (a GPU state only onto a GPU)."""
    torch.set_rng_state(state["cpu"])
    if "cuda" in state and device.type == "cuda":
        torch.cuda.set_rng_state(state["cuda"], device)
