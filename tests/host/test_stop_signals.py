"""stop_signals.py: SIGTERM and SIGINT handled by one handler for the length of a block, the
previous handlers back afterwards (also when the block fails); raised as Stopped, each recorded
first."""

from __future__ import annotations

import os
import signal
import sys
import weakref

import pytest

from transformer_cli.host.stop_signals import STOP_SIGNALS, Stopped, on_stop_signals, stop_signals_raise


def test_both_signals_reach_the_handler_within_the_block_and_the_old_handlers_come_back():
    assert set(STOP_SIGNALS) == {signal.SIGTERM, signal.SIGINT}
    before = {s: signal.getsignal(s) for s in STOP_SIGNALS}
    received: list[int] = []
    with on_stop_signals(lambda signum, frame: received.append(signum)):
        os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGINT)
    assert received == [signal.SIGTERM, signal.SIGINT]
    assert {s: signal.getsignal(s) for s in STOP_SIGNALS} == before
    with pytest.raises(ValueError), on_stop_signals(lambda signum, frame: None):
        raise ValueError("the block failed")
    assert {s: signal.getsignal(s) for s in STOP_SIGNALS} == before


def test_stop_signals_raise_records_each_signal_before_raising_it():
    """What the block did with the exception does not matter (the code it landed in may make
    another of it, or drop it): `received` tells. A dropped one is not reported on stderr."""
    before = {s: signal.getsignal(s) for s in STOP_SIGNALS}
    received: list[int] = []
    with pytest.raises(ImportError) as made, stop_signals_raise(received):
        try:
            os.kill(os.getpid(), signal.SIGTERM)
        except BaseException as e:  # as pybind11 does while its module initialises
            raise ImportError("initialization failed") from e
    assert received == [signal.SIGTERM] and isinstance(made.value.__cause__, Stopped)
    dropped: list[BaseException | None] = []
    hook, sys.unraisablehook = sys.unraisablehook, lambda args: dropped.append(args.exc_value)
    try:
        with stop_signals_raise(received):
            held = type("Held", (), {})()
            ref = weakref.ref(held, lambda ref: os.kill(os.getpid(), signal.SIGINT))
            del held  # the callback runs, and Python drops what it raised
    finally:
        sys.unraisablehook = hook
    assert received == [signal.SIGTERM, signal.SIGINT] and ref() is None and dropped == []
    assert {s: signal.getsignal(s) for s in STOP_SIGNALS} == before
