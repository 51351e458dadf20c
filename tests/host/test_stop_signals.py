"""stop_signals.py: SIGTERM and SIGINT handled by one handler for the length of a block, the
previous handlers back afterwards (also when the block fails)."""

from __future__ import annotations

import os
import signal

import pytest

from transformer_cli.host.stop_signals import STOP_SIGNALS, on_stop_signals


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
