"""Chunks of a corpus through a function in worker processes, in order, a few at a time.

`ChunkPool.map` keeps at most two chunks per worker in flight, so memory is bounded by the
chunk size whatever the corpus size (multiprocessing's `imap` reads its whole input ahead).
Workers are forked with a per-process setup (the tokenizers); they leave stop signals to the
main process, which stops between chunks and shuts them down, and die with it
(`as_helper_process`). With one worker everything runs in the calling process.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import ctypes
import multiprocessing
import os
import signal
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures.process import BrokenProcessPool
from typing import Any, TypeVar

from ..errors import TfmError
from ..host.stop_signals import STOP_SIGNALS

T = TypeVar("T")
R = TypeVar("R")
POLL_S = 0.2  # how often a wait for a worker checks for a stop request
PR_SET_PDEATHSIG = 1  # linux/prctl.h
# The process that forks workers, recorded by `stop_signals_held` just before: a worker reads
# it from the memory the fork copied.
_forker: int | None = None


def as_helper_process() -> None:
    """For a worker forked by tfm: stop signals are the parent's to handle (a Ctrl-C, or a
    torchrun or systemd SIGTERM to the whole group, must not kill a worker under a parent that
    is saving its state), and the worker dies with its parent (Linux: PR_SET_PDEATHSIG), so a
    SIGKILLed tfm leaves no orphans behind. A parent killed between the fork and the prctl
    sends no death signal: the worker then finds another parent and exits at once (without
    this, a worker forked at the moment its trainer was SIGKILLed polled for work forever)."""
    for signum in STOP_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)  # see `stop_signals_held`
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):  # not Linux: the parent's shutdown still ends the worker
        return
    if _forker is not None and os.getppid() != _forker:
        os._exit(0)


@contextlib.contextmanager
def stop_signals_held() -> Iterator[None]:
    """Hold stop signals back (blocked in this thread) while it forks workers. A worker starts
    with them blocked and unblocks them only once `as_helper_process` ignores them, so a
    SIGTERM to the whole process group (torchrun, systemd) that arrives while workers start
    cannot kill one on its way up (torch's DataLoader workers re-raise a SIGTERM not sent by
    their parent). This process receives a held signal when the block ends."""
    global _forker
    _forker = os.getpid()
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _start_worker(setup: Callable[..., None], args: tuple[Any, ...]) -> None:
    as_helper_process()
    setup(*args)


class ChunkPool:
    """`workers` processes, each set up once by `setup(*args)`."""

    def __init__(self, workers: int, setup: Callable[..., None], args: tuple[Any, ...]):
        self.workers = workers
        self._executor: concurrent.futures.ProcessPoolExecutor | None = None
        if workers > 1:
            self._executor = concurrent.futures.ProcessPoolExecutor(
                workers,
                mp_context=multiprocessing.get_context("fork"),
                initializer=_start_worker,
                initargs=(setup, args),
            )
        else:
            setup(*args)

    def __enter__(self) -> ChunkPool:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._executor is not None:
            # On an error or a stop, queued chunks are dropped; running ones finish (one chunk).
            self._executor.shutdown(wait=True, cancel_futures=exc[0] is not None)

    def map(
        self, fn: Callable[[T], R], chunks: Iterable[T], check_stop: Callable[[], None] | None = None
    ) -> Iterator[R]:
        """`fn` of each chunk, in order. `check_stop` is called while waiting (it may raise)."""
        if self._executor is None:
            for chunk in chunks:
                if check_stop is not None:
                    check_stop()
                yield fn(chunk)
            return
        pending: deque[concurrent.futures.Future[R]] = deque()
        for chunk in chunks:
            with stop_signals_held():  # a submission may fork the workers
                try:
                    pending.append(self._executor.submit(fn, chunk))
                except BrokenProcessPool:  # a worker died while earlier chunks ran
                    raise self._died(check_stop) from None
            if len(pending) >= 2 * self.workers:
                yield self._result(pending.popleft(), check_stop)
        while pending:
            yield self._result(pending.popleft(), check_stop)

    @staticmethod
    def _result(future: concurrent.futures.Future[R], check_stop: Callable[[], None] | None) -> R:
        while True:
            if check_stop is not None:
                check_stop()
            try:
                return future.result(timeout=POLL_S)
            except concurrent.futures.TimeoutError:
                continue
            except BrokenProcessPool:
                raise ChunkPool._died(check_stop) from None

    @staticmethod
    def _died(check_stop: Callable[[], None] | None) -> TfmError:
        """The error for a worker that died (a stop, when it was killed with this process)."""
        if check_stop is not None:
            check_stop()  # killed together with this process: a stop, not an error
        return TfmError("a preprocessing worker process died (out of memory?); nothing was written")
