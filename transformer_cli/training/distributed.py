"""Data-parallel training across processes started by `torchrun` (same command, same config).

Without torchrun's environment variables everything here is a no-op (one process).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class DistContext:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def all_reduce_sum(self, tensor: torch.Tensor) -> torch.Tensor:
        if self.enabled:
            dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
        return tensor

    def all_gather_object(self, obj: Any) -> list[Any]:
        """`obj` from every rank, in rank order (`[obj]` in one process)."""
        if not self.enabled:
            return [obj]
        gathered: list[Any] = [None] * self.world_size
        dist.all_gather_object(gathered, obj)
        return gathered

    def barrier(self) -> None:
        if self.enabled:
            dist.barrier()


def init_distributed(device: torch.device) -> tuple[DistContext, torch.device]:
    """Join the process group torchrun set up; returns the context and this rank's device."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return DistContext(), device
    rank, local_rank = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", "0"))
    if device.type == "cuda":
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
    if not dist.is_initialized():
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    return DistContext(rank, world, local_rank), device


def shutdown_distributed() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()
