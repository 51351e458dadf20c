"""training/signals.py: GracefulStop, in this process: the first SIGTERM or SIGINT is recorded
and said in a warning, `check()` then raises StopRequested at the next safe point, the second
signal exits at once (128+N), and the previous handlers come back after the block. (A signal
to `tfm train`, end to end: reliability/test_signals.py.)"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys

import pytest

from transformer_cli.training.signals import GracefulStop, StopRequested


def test_a_first_signal_is_a_stop_at_the_next_check(caplog):
    before = signal.getsignal(signal.SIGTERM)
    stop = GracefulStop("saving, then exiting")
    stop.check()  # nothing yet
    with caplog.at_level(logging.WARNING, logger="tfm"), stop:
        os.kill(os.getpid(), signal.SIGTERM)
        with pytest.raises(StopRequested) as caught:
            stop.check()
    assert caught.value.signum == signal.SIGTERM and str(caught.value) == "stopped by signal 15"
    assert "SIGTERM received: saving, then exiting (send it again to exit at once)" in caplog.text
    assert signal.getsignal(signal.SIGTERM) == before
    GracefulStop().__exit__(None, None, None)  # never entered: nothing to restore


def test_a_second_signal_exits_at_once():
    code = (
        "import os, signal, time\n"
        "from transformer_cli.training.signals import GracefulStop\n"
        "with GracefulStop():\n"
        "    os.kill(os.getpid(), signal.SIGINT)\n"
        "    os.kill(os.getpid(), signal.SIGINT)\n"
        "    time.sleep(5)\n"
        "print('not reached')\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert (r.returncode, r.stdout) == (130, "")
