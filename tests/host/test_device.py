"""device.py: which autocast dtype each device and precision gets, CPU threads, RNG states."""

from __future__ import annotations

import os

import pytest
import torch

from transformer_cli.errors import UsageError
from transformer_cli.host import device as device_module
from transformer_cli.host.device import autocast, autocast_dtype, ready_cuda, resolve_device, rng_state, set_rng_state
from transformer_cli.host.machine import available_cpus

CPU = torch.device("cpu")


def test_precision_choices_on_the_cpu():
    assert autocast_dtype(CPU, "fp32") is None
    assert autocast_dtype(CPU, "fp16") is torch.float16
    assert autocast_dtype(CPU, "bf16") is torch.bfloat16
    assert autocast_dtype(CPU, "auto") in (None, torch.bfloat16)  # bf16 only where it is native
    with pytest.raises(UsageError, match="not supported on mps"):
        autocast_dtype(torch.device("mps"), "bf16")


@pytest.mark.parametrize("fast_bf16, expected", [(True, torch.bfloat16), (False, None)])
def test_auto_on_the_cpu_is_bf16_only_where_it_is_native(monkeypatch, fast_bf16, expected):
    monkeypatch.setattr(device_module, "cpu_has_fast_bf16", lambda: fast_bf16)
    assert autocast_dtype(CPU, "auto") is expected
    assert autocast_dtype(CPU, "bf16") is torch.bfloat16  # asked for: emulated if need be


def test_gpus_get_bf16_when_native_else_fp16(monkeypatch):
    gpu = torch.device("cuda", 0)
    monkeypatch.setattr(device_module, "cuda_has_native_bf16", lambda device: True)
    assert autocast_dtype(gpu, "auto") is torch.bfloat16 and autocast_dtype(gpu, "bf16") is torch.bfloat16
    monkeypatch.setattr(device_module, "cuda_has_native_bf16", lambda device: False)  # T4, V100
    assert autocast_dtype(gpu, "auto") is torch.float16
    with pytest.raises(UsageError, match="not supported natively on this GPU"):
        autocast_dtype(gpu, "bf16")
    assert autocast_dtype(gpu, "fp32") is None and autocast_dtype(gpu, "fp16") is torch.float16


def test_mps_auto_is_fp32():
    assert autocast_dtype(torch.device("mps"), "auto") is None


def test_autocast_runs_matmuls_in_the_chosen_dtype():
    a, b = torch.randn(4, 8), torch.randn(8, 3)
    with autocast(CPU, None):
        assert (a @ b).dtype is torch.float32
    with autocast(CPU, torch.bfloat16):
        assert (a @ b).dtype is torch.bfloat16


def test_resolve_device():
    assert resolve_device("cpu") == CPU
    assert resolve_device("auto").type in ("cpu", "cuda", "mps")
    if not torch.cuda.is_available():
        with pytest.raises(UsageError, match="no CUDA GPU"):
            resolve_device("cuda")


def test_default_threads_are_the_cpus_this_process_may_use():
    assert available_cpus() == len(os.sched_getaffinity(0))


def test_rng_state_round_trip():
    state = rng_state(CPU)
    assert set(state) == {"cpu"}  # no GPU state on the CPU
    first = torch.rand(5)
    set_rng_state(state, CPU)
    assert torch.equal(torch.rand(5), first)


def test_ready_cuda_leaves_every_attention_kernel_but_cudnns():
    """cuDNN's kernels build a graph per new shape: 0.24x tfm's speed on an H200 (results.md)."""
    before = torch.backends.cuda.cudnn_sdp_enabled()
    try:
        torch.backends.cuda.enable_cudnn_sdp(True)
        ready_cuda()
        assert not torch.backends.cuda.cudnn_sdp_enabled()
        assert torch.backends.cuda.flash_sdp_enabled() and torch.backends.cuda.mem_efficient_sdp_enabled()
        assert torch.backends.cuda.math_sdp_enabled()
    finally:
        torch.backends.cuda.enable_cudnn_sdp(before)
