"""Optimizer and learning-rate schedule from the `train` config section, and `Optimization`,
which takes a run's optimizer steps with them."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from typing import Any, cast

import torch
from torch import Tensor, nn
from torch.nn.parallel import DistributedDataParallel

from ..checkpoint import TrainState
from ..config_train import TrainConfig
from ..data.batching import Batch
from ..seams import OPTIMIZERS, SCHEDULES, Criterion, MakeOptimizer
from .distributed import DistContext
from .optim_settings import AdamOptions, InverseSqrtOptions

# OPTIMIZERS (seams.py): train.optimizer -> builder(parameter groups, train settings, device);
# SCHEDULES: train.schedule -> the multiplier of train.lr before optimizer step `step` (0-based).
# The settings of tfm's own: training/optim_settings.py.


def _adam(cls: Callable[..., torch.optim.Optimizer]) -> MakeOptimizer:
    """Adam or AdamW; the fused kernel on CPUs and GPUs (2.4x faster than the multi-tensor one
    on a CPU, benchmarks/optimizer_step.py), the multi-tensor one elsewhere."""

    def build(groups: list[dict[str, Any]], cfg: TrainConfig, device: torch.device) -> torch.optim.Optimizer:
        fused = device.type in ("cpu", "cuda")
        own: AdamOptions = OPTIMIZERS.options(cfg.optimizer, cfg.optimizer_options)
        return cls(groups, lr=cfg.lr, betas=tuple(own.betas), eps=own.eps, fused=fused, foreach=None if fused else True)

    return build


ADAM = _adam(torch.optim.Adam)
ADAMW = _adam(torch.optim.AdamW)


def build_optimizer(model: nn.Module, cfg: TrainConfig, device: torch.device) -> torch.optim.Optimizer:
    """train.optimizer over the model's parameter groups (the matrices decayed by its settings'
    weight_decay, where they have one)."""
    own = OPTIMIZERS.options(cfg.optimizer, cfg.optimizer_options)
    groups = parameter_groups(model, getattr(own, "weight_decay", 0.0))
    return OPTIMIZERS[cfg.optimizer](groups, cfg, device)


def parameter_groups(model: nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    """Weight decay for matrices (projections, embeddings) only: biases and LayerNorm gains
    (the 1-D parameters) are not decayed. Without decay, one group (as older runs saved it)."""
    params = [p for p in model.parameters() if p.requires_grad]
    if weight_decay == 0.0:
        return [{"params": params, "weight_decay": 0.0}]
    return [
        {"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]


def inverse_sqrt(cfg: TrainConfig, step: int) -> float:
    """Linear warmup to 1 over `warmup_steps`, then √(warmup/step): the paper's schedule with
    its peak set by `lr`."""
    own: InverseSqrtOptions = SCHEDULES.options("inverse_sqrt", cfg.schedule_options)  # ~12 us, once a step
    s = step + 1
    return min(s / own.warmup_steps, math.sqrt(own.warmup_steps / s))


def constant(cfg: TrainConfig, step: int) -> float:
    """train.lr at every step."""
    return 1.0


def build_scheduler(optimizer: torch.optim.Optimizer, cfg: TrainConfig) -> torch.optim.lr_scheduler.LambdaLR:
    schedule = SCHEDULES[cfg.schedule]  # an unknown name is refused here, before the first step
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: schedule(cfg, step))


class Optimization:
    """One optimizer step of a run: the training step's backward passes over a group of batches
    with their loss normalised over the whole step (over every rank under DDP), then clipping,
    the optimizer and the schedule, with fp16's loss scaler where the precision needs one."""

    def __init__(
        self,
        model: nn.Module,
        net: nn.Module,
        batch_loss: Criterion,
        tc: TrainConfig,
        device: torch.device,
        dtype: torch.dtype | None,
        dist: DistContext,
    ):
        self.model, self.net, self.batch_loss = model, net, batch_loss
        self.device, self.dtype, self.dist, self.clip_norm = device, dtype, dist, tc.clip_norm
        self.optimizer = build_optimizer(model, tc, device)
        self.scheduler = build_scheduler(self.optimizer, tc)
        # fp16 overflows where bf16 does not: scale the loss, skip steps whose gradients overflow.
        self.scaler = torch.amp.GradScaler(device.type) if dtype == torch.float16 else None

    @property
    def lr(self) -> float:
        return float(self.scheduler.get_last_lr()[0])

    def step(self, batches: list[Batch]) -> tuple[int, Tensor]:
        """One optimizer step over `batches`; returns this rank's target tokens and their summed
        NLL (a 0-dim tensor on the device, so that nothing here waits for the step to finish)."""
        n_tokens, nll = self._accumulate_gradients(batches)
        self._update()
        return n_tokens, nll

    def _accumulate_gradients(self, batches: list[Batch]) -> tuple[int, Tensor]:
        """Backward passes over each batch, each summed loss divided by the target tokens of the
        whole step, so the gradient is that of one batch holding every pair of the step. Under
        DDP only the last backward synchronises the gradients."""
        batches = [b.to(self.device) for b in batches]
        n_tokens = sum(b.n_tokens for b in batches)
        normaliser = self._loss_normaliser(n_tokens)
        nll_sum = torch.zeros((), device=self.device)
        for i, b in enumerate(batches):
            last = i == len(batches) - 1
            # Under DDP, net is the DistributedDataParallel wrapper.
            no_sync = (
                cast(DistributedDataParallel, self.net).no_sync()
                if self.dist.enabled and not last
                else contextlib.nullcontext()
            )
            with no_sync:
                loss, nll = self.batch_loss(self.net, b, self.dtype)
                loss = loss / normaliser
                (self.scaler.scale(loss) if self.scaler is not None else loss).backward()  # type: ignore[no-untyped-call]  # torch leaves it unannotated
            nll_sum += nll
        return n_tokens, nll_sum

    def _loss_normaliser(self, n_tokens: int) -> int | Tensor:
        """What this rank divides its summed loss by. One process: its step's target tokens.
        Under DDP the ranks' batches hold different token counts and DDP averages the ranks'
        gradients, so each rank divides by (all ranks' tokens) / world_size: the mean of the
        ranks' gradients is then the gradient of the step's total loss over its total tokens,
        as one process accumulating every rank's batches computes it (fairseq normalises by
        the all-reduced sample size likewise). The count stays on the device: no host sync."""
        if not self.dist.enabled:
            return n_tokens
        total = self.dist.all_reduce_sum(torch.tensor(float(n_tokens), device=self.device))
        return total / self.dist.world_size

    def _update(self) -> None:
        """Clip, step (skipped by the fp16 scaler on overflow), schedule, clear the gradients."""
        if self.scaler is not None:
            self.scaler.unscale_(self.optimizer)  # clip the true gradients
        if self.clip_norm is not None:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.clip_norm)
        if self.scaler is not None:
            self.scaler.step(self.optimizer)  # skipped when the gradients overflowed
            self.scaler.update()
        else:
            self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)

    def state(self) -> dict[str, Any]:
        """The optimizer, schedule and scaler states, as TrainState stores them."""
        return {
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "grad_scaler": None if self.scaler is None else self.scaler.state_dict(),
        }

    def load_state(self, state: TrainState) -> None:
        self.optimizer.load_state_dict(state.optimizer)
        self.scheduler.load_state_dict(state.scheduler)
        if self.scaler is not None and state.grad_scaler is not None:
            self.scaler.load_state_dict(state.grad_scaler)
