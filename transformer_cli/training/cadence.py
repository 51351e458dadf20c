"""When a training run honours a stop signal and saves last.pt between validations.

After every optimizer step the loop asks `after_step`: a stop signal raises StopRequested (the
loop saves and exits), and a save is due every `train.checkpoint_every_steps` steps or
`train.checkpoint_every_minutes` minutes. Under DDP every rank must take the same path, so the
ranks agree on the signal and the clock in one all-reduce, at the steps `Agreement` names
(about once a second) rather than at every step: no step waits on a host read-back.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch

from ..config_train import TrainConfig
from .distributed import Agreement, DistContext
from .signals import GracefulStop, StopRequested

StopCheck = Callable[[], None]


class Cadence:
    def __init__(self, tc: TrainConfig, stop: GracefulStop, dist: DistContext, device: torch.device):
        self.every_steps, self.every_minutes = tc.checkpoint_every_steps, tc.checkpoint_every_minutes
        self.stop, self.dist, self.device = stop, dist, device
        self.agreement = Agreement()  # under DDP: when the ranks next agree on stop/save
        self.last_save = time.monotonic()

    def after_step(self, step: int, epoch_end: bool = False) -> bool:
        """After optimizer step `step` (the last of its epoch: `epoch_end`): raise
        StopRequested if a stop signal arrived (on any rank); return whether to save last.pt now."""
        return self._agree(step, self._due_by_time(), epoch_end) or self._due_by_steps(step)

    def saved(self) -> None:
        self.last_save = time.monotonic()

    def between_batches(self, steps: int = 0, alone: bool = False) -> LoopStop:
        """The stop check of a loop this rank takes `steps` steps through (validation and
        decoding batches); call its `finish` after the loop. One process checks its own signal;
        under DDP the ranks may take different numbers of steps (their shards of the
        validation set), so every check meets the others (`LoopStop`) and a signal on any
        rank stops them all at the same step, seconds after it came, validation included.
        `alone`: a loop only this rank runs (rank 0 averaging snapshots): its own signal only."""
        return LoopStop(self.stop, DistContext() if alone else self.dist, self.device, steps)

    def _agree(self, step: int, save_due: bool, epoch_end: bool) -> bool:
        """Raise StopRequested on a signal; return `save_due` as the ranks agree on it.

        One process: at every call. Under DDP, at the agreed steps only (stop: any rank's
        signal; save: rank 0's clock): rank 0 sends the next interval in steps with the flags,
        so every rank knows when the next agreement is without another collective. Every
        epoch's last step is one too (every rank knows it), so a signal waits for an epoch at
        most, however short the epochs are against the interval."""
        if not self.dist.enabled:
            self.stop.check()
            return save_due
        if not (epoch_end or self.agreement.due(step)):
            return False
        interval = self.agreement.next_interval(step) if self.dist.is_main else 0
        flags = torch.tensor(
            [float(self.stop.signum is not None), float(save_due and self.dist.is_main), float(interval)],
            device=self.device,
        )
        stop, save, interval = self.dist.all_reduce_sum(flags).tolist()
        self.agreement.schedule(step, int(interval))
        if stop > 0:  # another rank's signal: this one stops as that one does
            raise StopRequested(self.stop.signum or 15)
        return bool(save > 0)

    def _due_by_steps(self, step: int) -> bool:
        """train.checkpoint_every_steps: the same answer on every rank."""
        return bool(self.every_steps and step % self.every_steps == 0)

    def _due_by_time(self) -> bool:
        """train.checkpoint_every_minutes on this process's clock (rank 0's decides under DDP)."""
        return bool(self.every_minutes and time.monotonic() - self.last_save >= 60 * self.every_minutes)


class LoopStop:
    """A stop check for a loop whose ranks may take different numbers of steps: in one
    process, the signal's own check; under DDP each call is one all-reduce of the ranks' stop
    flags, and `finish` makes this rank's calls up to the most any rank makes, so that every
    rank meets the others as often and a signal stops them all at the same call."""

    def __init__(self, stop: GracefulStop, dist: DistContext, device: torch.device, steps: int):
        self.stop, self.dist, self.device = stop, dist, device
        self.left = 0
        if dist.enabled:
            self.left = int(dist.all_reduce_max(torch.tensor(steps, device=device)))

    def __call__(self) -> None:
        if not self.dist.enabled:
            self.stop.check()
            return
        self.left -= 1
        flag = torch.tensor(float(self.stop.signum is not None), device=self.device)
        if float(self.dist.all_reduce_sum(flag)) > 0:
            raise StopRequested(self.stop.signum or 15)

    def finish(self) -> None:
        while self.left > 0:
            self()
