"""SIGTERM and SIGINT, the signals that ask tfm to stop, handled for the length of a block."""

from __future__ import annotations

import contextlib
import signal
import sys
from collections.abc import Callable, Iterator
from types import FrameType

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
SignalHandler = Callable[[int, FrameType | None], None]


@contextlib.contextmanager
def on_stop_signals(handler: SignalHandler) -> Iterator[None]:
    """Within the block, SIGTERM and SIGINT call `handler`; the previous handlers come back
    afterwards."""
    previous = {s: signal.signal(s, handler) for s in STOP_SIGNALS}
    try:
        yield
    finally:
        for s, old in previous.items():
            signal.signal(s, old)


class Stopped(BaseException):
    """SIGTERM or SIGINT, raised wherever the code is (`stop_signals_raise`): a BaseException
    (like KeyboardInterrupt) so that no `except Exception` on its way takes it for a failure of
    the work."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


@contextlib.contextmanager
def stop_signals_raise(received: list[int]) -> Iterator[None]:
    """Within the block, SIGTERM and SIGINT raise `Stopped` at once, wherever the code is (the
    work in progress is abandoned, its cleanup runs), after appending the signal to `received`;
    the previous handlers come back afterwards.

    Whether the block was stopped is for `received` to tell, not the exception that leaves it:
    the code a signal lands in may make another exception of `Stopped` (pybind11 turns one
    raised while its extension module initialises, e.g. SentencePiece's on its first import,
    into `ImportError: initialization failed`), or drop it (Python reports and forgets what a
    weakref callback or a `__del__` raises, e.g. importlib's module-lock callbacks: the block
    then runs on to its end). Such a dropped `Stopped` is not reported."""

    def stop(signum: int, frame: FrameType | None) -> None:
        received.append(signum)
        raise Stopped(signum)

    def unraisable(args: sys.UnraisableHookArgs) -> None:
        if not isinstance(args.exc_value, Stopped):
            previous_hook(args)

    previous_hook, sys.unraisablehook = sys.unraisablehook, unraisable
    try:
        with on_stop_signals(stop):
            yield
    finally:
        sys.unraisablehook = previous_hook
