"""SIGTERM and SIGINT, the signals that ask tfm to stop, handled for the length of a block."""

from __future__ import annotations

import contextlib
import signal
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
