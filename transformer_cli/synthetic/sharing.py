"""`tfm synthesize --nproc-per-node N`: N - 1 more processes on this machine translate beside
the one that makes the corpus, each `tfm synthesize --helper` of the same config (mixture.
help_translate): they claim chunks from the shared caches, so the work is split and the corpus
is the one a single process makes. Each process gets its share of the CPUs as its threads
(`threads_each`). Their errors reach stderr as their own lines; the corpus does not depend on
them (a chunk a helper leaves is translated by the others). When the main process ends, for
whatever reason, the helpers still running are stopped (SIGTERM, then SIGKILL after
`STOP_GRACE_S`).

Under torchrun the other ranks of `tfm train` do the same (training/session.py).
"""

from __future__ import annotations

import contextlib
import logging
import signal
import subprocess
import sys
from collections.abc import Iterator

from ..config import Config
from ..host.machine import available_cpus

log = logging.getLogger("tfm")
STOP_GRACE_S = 4.0  # a helper asked to stop finishes its batch within this, or is killed
HELPER_OPTION = "--helper"


def threads_each(cfg: Config, processes: int) -> int:
    """Threads for each of `processes`: train.threads when it is a number, else the CPUs this
    process may use, shared out (at least one each)."""
    threads = cfg.train.threads
    return threads if isinstance(threads, int) else max(1, available_cpus() // processes)


@contextlib.contextmanager
def helpers(config: str, overrides: list[str], count: int, threads: int) -> Iterator[None]:
    """`count` helper processes of `tfm synthesize -c config` with `overrides`, each at `threads`
    threads, running for the block."""
    sets = [arg for o in [*overrides, f"train.threads={threads}"] for arg in ("--set", o)]
    argv = [sys.executable, "-m", "transformer_cli", "synthesize", "-c", config, *sets, "--quiet", HELPER_OPTION]
    started = [subprocess.Popen(argv, stdin=subprocess.DEVNULL) for _ in range(count)]
    log.info("synthesis: %d more process(es) translating beside this one, %d thread(s) each", count, threads)
    try:
        yield
    finally:
        _stop(started)


def _stop(processes: list[subprocess.Popen[bytes]]) -> None:
    for p in processes:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in processes:
        try:
            p.wait(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
