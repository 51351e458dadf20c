"""synthetic/sharing.py: `tfm synthesize --nproc-per-node N` shares the CPUs out among its
processes and stops the helpers still running when it ends (SIGTERM, then SIGKILL). That the
corpus is one process's is tested end to end in test_mixture.py."""

from __future__ import annotations

import subprocess
import sys
import time

from transformer_cli.config import Config
from transformer_cli.host.machine import available_cpus
from transformer_cli.synthetic.sharing import STOP_GRACE_S, _stop, threads_each


def test_each_process_gets_its_share_of_the_cpus_or_the_configured_count():
    cfg = Config(name="x")
    cfg.train.threads = "auto"
    assert threads_each(cfg, 1) == available_cpus() and threads_each(cfg, 10_000) == 1
    cfg.train.threads = 3
    assert threads_each(cfg, 2) == 3


def sleeper(ignore_sigterm: bool) -> subprocess.Popen:
    code = "import signal, time\n"
    if ignore_sigterm:
        code += "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    code += "print('ready', flush=True)\ntime.sleep(60)\n"
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    return p


def test_helpers_still_running_are_stopped_and_killed_when_they_do_not_stop():
    polite, deaf = sleeper(False), sleeper(True)
    started = time.monotonic()
    _stop([polite, deaf])
    took = time.monotonic() - started
    assert polite.returncode == -15 and deaf.returncode == -9
    assert STOP_GRACE_S - 0.5 <= took < STOP_GRACE_S + 5
