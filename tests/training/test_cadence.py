"""training/cadence.py: Cadence, the logic that decides when DDP ranks stop and save, on its own:
ranks as threads around a fake process group whose all-reduce is a barrier and a sum (no
torchrun, no gloo), and a clock the test moves."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any, cast

import pytest
import torch

from transformer_cli.config_train import TrainConfig
from transformer_cli.training.cadence import Cadence
from transformer_cli.training.distributed import DistContext
from transformer_cli.training.signals import GracefulStop, StopRequested


class Clock:
    """time.monotonic, moved by the test."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch) -> Clock:
    c = Clock()
    monkeypatch.setattr(time, "monotonic", c)  # the clock of distributed.py and cadence.py
    return c


@dataclass
class Group:
    """What the ranks of a fake process group share: their contributions to an all-reduce."""

    size: int
    barrier: threading.Barrier = field(init=False)
    parts: list = field(init=False)
    calls: list = field(default_factory=list)  # (rank, step) of every all-reduce

    def __post_init__(self) -> None:
        self.barrier = threading.Barrier(self.size, timeout=10)
        self.parts = [None] * self.size


@dataclass(frozen=True)
class FakeDist:
    """A DistContext whose all_reduce_sum meets the other ranks' threads."""

    rank: int
    group: Group

    world_size = property(lambda self: self.group.size)
    enabled = property(lambda self: self.group.size > 1)
    is_main = property(lambda self: self.rank == 0)

    def all_reduce_sum(self, tensor: torch.Tensor) -> torch.Tensor:
        self.group.parts[self.rank] = tensor.clone()
        self.group.barrier.wait()
        total = torch.stack(self.group.parts).sum(0)
        self.group.barrier.wait()  # every rank has read the parts before they are replaced
        return total


def run_ranks(size: int, steps_per_epoch: int, epochs: int, on_step, tc: TrainConfig | None = None):
    """Each rank a thread stepping through the epochs; `on_step(rank, step, cadence, stop)` may
    raise a signal or move the clock. Returns per rank: [(step, save)], and where it stopped."""
    group = Group(size)
    results: list[dict[str, Any]] = [dict(saves=[], stopped=None, agreements=None) for _ in range(size)]

    def rank_loop(rank: int) -> None:
        stop = GracefulStop()
        cadence = Cadence(
            tc or TrainConfig(checkpoint_every_minutes=None),
            stop,
            cast(DistContext, FakeDist(rank, group)),
            torch.device("cpu"),
        )
        step = 0
        try:
            for _ in range(epochs):
                for i in range(steps_per_epoch):
                    step += 1
                    on_step(rank, step, cadence, stop)
                    if cadence.after_step(step, epoch_end=i + 1 == steps_per_epoch):
                        results[rank]["saves"].append(step)
                        cadence.saved()
        except StopRequested:
            results[rank]["stopped"] = step
        results[rank]["agreements"] = cadence.agreement.count

    threads = [threading.Thread(target=rank_loop, args=(r,)) for r in range(size)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert not any(t.is_alive() for t in threads), "a rank hangs: the ranks disagree on a meeting step"
    return results


def test_the_ranks_meet_about_once_a_second_and_at_every_epoch_end(clock):
    def tick(rank, step, cadence, stop):
        if rank == 0:
            clock.now += 0.01  # 100 steps a second on rank 0's clock

    results = run_ranks(3, steps_per_epoch=250, epochs=2, on_step=tick)
    counts = {r["agreements"] for r in results}
    assert len(counts) == 1  # every rank met at every meeting (else one would hang)
    # ~5 s of steps: about one meeting a second once the rate is known, plus the two epoch ends
    # and the first few at steps 1, 2 (one step apart while the rate is measured)
    assert 5 <= counts.pop() <= 12


def test_a_signal_on_one_rank_stops_every_rank_at_the_same_step(clock):
    def signal_rank_2(rank, step, cadence, stop):
        if rank == 0:
            clock.now += 0.01
        if rank == 2 and step == 137:
            stop.signum = 15  # as GracefulStop's handler records a SIGTERM

    results = run_ranks(3, steps_per_epoch=1000, epochs=1, on_step=signal_rank_2)
    stopped = {r["stopped"] for r in results}
    assert len(stopped) == 1
    step = stopped.pop()
    assert 137 <= step <= 137 + 100  # at the next meeting: within about a second of steps


def test_a_signal_waits_at_most_for_the_epochs_end_however_short_the_epochs(clock):
    def slow_then_signal(rank, step, cadence, stop):
        if rank == 0:
            clock.now += 0.0001  # 10,000 steps a second: meetings far apart
        if rank == 1 and step == 12:
            stop.signum = 15

    results = run_ranks(2, steps_per_epoch=20, epochs=5, on_step=slow_then_signal)
    assert [r["stopped"] for r in results] == [20, 20]  # epoch 1 ends at step 20


def test_rank_0s_clock_decides_a_timed_save_for_every_rank(clock):
    def tick(rank, step, cadence, stop):
        if rank == 0:
            clock.now += 1.0  # a second a step: a 1-minute save is due after 60 steps

    tc = TrainConfig(checkpoint_every_minutes=1.0, checkpoint_every_steps=None)
    results = run_ranks(2, steps_per_epoch=150, epochs=1, on_step=tick, tc=tc)
    assert results[0]["saves"] == results[1]["saves"] and len(results[0]["saves"]) == 2


def test_one_process_checks_the_signal_at_every_step_without_collectives(clock):
    group = Group(1)
    stop = GracefulStop()
    cadence = Cadence(
        TrainConfig(checkpoint_every_steps=5, checkpoint_every_minutes=None),
        stop,
        FakeDist(0, group),
        torch.device("cpu"),
    )
    assert [cadence.after_step(s) for s in range(1, 11)] == [False] * 4 + [True] + [False] * 4 + [True]
    stop.signum = 2
    with pytest.raises(StopRequested):
        cadence.after_step(11)
    assert cadence.agreement.count == 0
