"""Graceful stop: the first SIGTERM/SIGINT asks the loop to save and exit; a second one exits now.
A deadline (`until`: the window of a run from scratch behind the nights, training/scratch.py)
stops the same way when it passes, reported as WINDOW_ENDED."""

from __future__ import annotations

import logging
import os
import signal
import time
from types import FrameType

from ..host.stop_signals import on_stop_signals

log = logging.getLogger("tfm")

# What a passed deadline stops as: the alarm clock's signal (tfm never handles the signal itself).
WINDOW_ENDED = int(signal.SIGALRM)


class StopRequested(Exception):
    """Raised by `GracefulStop.check()` at a safe point after a signal arrived."""

    def __init__(self, signum: int):
        super().__init__(f"stopped by signal {signum}")
        self.signum = signum


class GracefulStop:
    """Context manager that records a stop request instead of dying mid-write.

    Long loops (training steps, validation batches, decoding batches, tokenization, promotion
    scoring) call `check()` between units of work, so a stop is honoured within seconds.
    """

    def __init__(self, on_stop: str = "saving a resumable checkpoint, then exiting") -> None:
        """`on_stop`: what the process does now, as the warning of a first signal says it."""
        self.signum: int | None = None
        self.on_stop = on_stop
        self.deadline: float | None = None  # time.monotonic() at which `check` stops (until)
        self._handling = on_stop_signals(self._handle)
        self._entered = False

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.signum is not None:
            os._exit(128 + signum)  # second signal: leave at once (files stay consistent)
        self.signum = signum
        log.warning("%s received: %s (send it again to exit at once)", signal.Signals(signum).name, self.on_stop)

    def until(self, deadline: float | None) -> None:
        """Stop at `deadline` (time.monotonic()) as on a signal, WINDOW_ENDED (None: never)."""
        self.deadline = deadline

    def check(self) -> None:
        """Raise StopRequested if a stop signal has arrived or the deadline has passed."""
        if self.signum is None and self.deadline is not None and time.monotonic() >= self.deadline:
            self.signum = WINDOW_ENDED
        if self.signum is not None:
            raise StopRequested(self.signum)

    def __enter__(self) -> GracefulStop:
        self._handling.__enter__()
        self._entered = True
        return self

    def __exit__(self, *exc: object) -> None:
        """Restore the previous handlers (nothing to do if the block was never entered)."""
        if self._entered:
            self._entered = False
            self._handling.__exit__(None, None, None)
