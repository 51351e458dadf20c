"""Data-parallel training across processes started by `torchrun` (same command, same config).

Without torchrun's environment variables everything here is a no-op (one process).
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from ..errors import TfmError, UsageError, first_line
from .peer_watch import Peer, PeerWatch


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

    def all_reduce_max(self, tensor: torch.Tensor) -> torch.Tensor:
        if self.enabled:
            dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
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


class Agreement:
    """The steps at which DDP ranks agree on their stop and save flags (one all-reduce), about
    every `every_s` seconds: rank 0 derives the next interval in steps from the step rate
    since the last agreement and sends it with the flags, so all ranks meet at the same step.
    """

    def __init__(self, every_s: float = 1.0, max_interval: int = 1000):
        self.every_s, self.max_interval = every_s, max_interval
        self.count = 0  # agreements so far
        self._next = 0  # the step of the next one
        self._mark: tuple[int, float] | None = None  # (step, monotonic time) of the last one

    def due(self, step: int) -> bool:
        return step >= self._next

    def next_interval(self, step: int) -> int:
        """Rank 0: steps until the next agreement (1 until a step rate is known)."""
        now = time.monotonic()
        interval = 1
        if self._mark is not None and step > self._mark[0]:
            seconds_per_step = max((now - self._mark[1]) / (step - self._mark[0]), 1e-6)
            interval = max(1, min(self.max_interval, int(self.every_s / seconds_per_step)))
        self._mark = (step, now)
        return interval

    def schedule(self, step: int, interval: int) -> None:
        """Every rank: the agreement at `step` set the next one `interval` steps later."""
        self._next = step + interval
        self.count += 1


def check_same_world_size(checkpoint: Path, saved: int, current: int) -> None:
    """Refuse to go on from a last.pt written under another number of processes: each rank's
    share of an epoch's batches and its RNG stream depend on it, so the resumed run would not
    be the one that was interrupted."""
    if saved != current:
        raise UsageError(
            f"{checkpoint} was written by {saved} training process(es), this is "
            f"{current}: resume it with {saved} (torchrun --nproc_per_node, times "
            "--nnodes), or start the run over with --restart"
        )


class PeerLost(TfmError):
    """A collective failed because another training process is gone (exit 1)."""


# What gloo and NCCL say when a peer died or stopped answering (they raise plain RuntimeErrors).
_PEER_FAILURES = ("Connection closed by peer", "Connection reset by peer", "NCCL", "gloo", "timed out", "Timed out")


def peer_lost(e: RuntimeError, ctx: DistContext) -> PeerLost | None:
    """The one-line error for a collective that failed because a peer is gone, else None."""
    if not ctx.enabled or not (isinstance(e, dist.DistError) or any(s in str(e) for s in _PEER_FAILURES)):
        return None
    first = first_line(e)
    return PeerLost(
        f"rank {ctx.rank}: another training process stopped or crashed ({first[:200]}); "
        "the last saved state is kept: run the same command to resume"
    )


def init_distributed(
    device: torch.device, timeout_min: float = 30.0, rendezvous_s: float = 120.0
) -> tuple[DistContext, torch.device]:
    """Join the process group of the ranks torchrun (or another launcher: RANK, WORLD_SIZE,
    MASTER_ADDR, MASTER_PORT) started; returns the context and this rank's device. The ranks
    must meet at MASTER_ADDR:MASTER_PORT within `rendezvous_s` seconds (train.
    rendezvous_timeout_s); a collective that waits longer than `timeout_min` for the others
    fails later on (train.collective_timeout_min). A port in use, or ranks that never meet,
    are one line naming the address (exit 2, exit 1) on every rank."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return DistContext(), device
    rank, local_rank = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", "0"))
    if device.type == "cuda":
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
    if not dist.is_initialized():
        store = _rendezvous(rank, world, rendezvous_s)
        dist.init_process_group(
            "nccl" if device.type == "cuda" else "gloo",
            store=store,
            rank=rank,
            world_size=world,
            timeout=timedelta(minutes=timeout_min),
        )
        _watch_peers(store, rank, world)
    return DistContext(rank, world, local_rank), device


# The watch over the other ranks on this machine, while this process belongs to a group.
_watch: PeerWatch | None = None


def _watch_peers(store: dist.Store, rank: int, world: int) -> None:
    global _watch
    here = Peer(rank, socket.gethostname(), os.getpid())
    everyone: list[Any] = [None] * world
    dist.all_gather_object(everyone, here)
    others = [peer for peer in everyone if peer.host == here.host and peer.rank != rank]
    _watch = PeerWatch(store, rank, others, _exit_with)
    _watch.start()


def _rendezvous(rank: int, world: int, seconds: float) -> dist.Store:
    """The store the ranks meet through: rank 0 serves it at MASTER_ADDR:MASTER_PORT (torchrun's
    agent serves it itself when it says so), the others connect to it."""
    address, port = os.environ.get("MASTER_ADDR", "127.0.0.1"), os.environ.get("MASTER_PORT", "29500")
    where = f"{address}:{port} (MASTER_ADDR:MASTER_PORT)"
    serves = rank == 0 and os.environ.get("TORCHELASTIC_USE_AGENT_STORE") != "True"

    def no_meeting(reason: str) -> str:
        return (
            f"rank {rank}: the training processes did not all meet at {where} within "
            f"{seconds:g} s (train.rendezvous_timeout_s): {reason[:200]}"
        )

    # A client's handshake with a listener that never answers (another program on the port)
    # blocks inside torch, past its timeout: a watchdog ends the process with the same line.
    # Nothing has been written yet (rank 0 alone writes, and it serves the store).
    watchdog = threading.Timer(seconds + 5, _exit_with, (no_meeting("no answer from it"),))
    watchdog.daemon = True
    if not serves:
        watchdog.start()
    try:
        return dist.TCPStore(
            address, int(port), world, is_master=serves, timeout=timedelta(seconds=seconds), wait_for_workers=True
        )
    except ValueError as e:
        raise UsageError(f"rank {rank}: MASTER_PORT must be a port number (got {port!r}): {e}") from None
    except (RuntimeError, OSError) as e:  # DistNetworkError, DistStoreError: one kind of message each
        text = first_line(e)
        if "EADDRINUSE" in text or "address already in use" in text.lower():
            raise UsageError(
                f"rank {rank}: cannot serve the training processes' meeting point at "
                f"{where}: the port is in use; choose another MASTER_PORT"
            ) from None
        raise TfmError(no_meeting(text)) from None
    finally:
        watchdog.cancel()


def _exit_with(message: str) -> None:
    """The CLI's one-line error and exit code 1, from a thread, while the main one is stuck."""
    sys.stderr.write(f"tfm: error: {message}\n")
    sys.stderr.flush()
    os._exit(1)


def shutdown_distributed(in_order: bool = True) -> None:
    """Leave the group; `in_order`: this process's end is no failure of the run (it finished,
    or a signal stopped every rank), which the other ranks' peer watch is told."""
    global _watch
    if _watch is not None:
        _watch.leave(in_order)
        _watch = None
    if dist.is_initialized():
        dist.destroy_process_group()
