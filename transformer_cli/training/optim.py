"""Optimizer and learning-rate schedule from the `train` config section."""

from __future__ import annotations

import math

import torch
from torch import nn

from ..config import TrainConfig


def build_optimizer(model: nn.Module, cfg: TrainConfig, device: torch.device) -> torch.optim.Optimizer:
    """Adam or AdamW; the fused kernel on CPUs and GPUs (2.4x faster than the multi-tensor one
    on a CPU, benchmarks/optimizer_step.py), the multi-tensor one elsewhere."""
    cls = torch.optim.AdamW if cfg.optimizer == "adamw" else torch.optim.Adam
    fused = device.type in ("cpu", "cuda")
    return cls(parameter_groups(model, cfg.weight_decay), lr=cfg.lr, betas=tuple(cfg.betas),
               eps=cfg.eps, fused=fused, foreach=None if fused else True)


def parameter_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """Weight decay for matrices (projections, embeddings) only: biases and LayerNorm gains
    (the 1-D parameters) are not decayed. Without decay, one group (as older runs saved it)."""
    params = [p for p in model.parameters() if p.requires_grad]
    if weight_decay == 0.0:
        return [{"params": params, "weight_decay": 0.0}]
    return [{"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
            {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]


def lr_factor(cfg: TrainConfig, step: int) -> float:
    """Multiplier of cfg.lr before optimizer step `step` (0-based).

    constant: 1. inverse_sqrt: linear warmup to 1 over `warmup_steps`, then
    √(warmup/step) — the paper's schedule with its peak set by `lr`.
    """
    if cfg.schedule == "constant":
        return 1.0
    s = step + 1
    return min(s / cfg.warmup_steps, math.sqrt(cfg.warmup_steps / s))


def build_scheduler(optimizer: torch.optim.Optimizer, cfg: TrainConfig) -> torch.optim.lr_scheduler.LambdaLR:
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: lr_factor(cfg, step))
