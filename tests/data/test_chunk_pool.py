"""data/parallel.py: ChunkPool on its own: results in order, at most two chunks per worker in
flight (memory stays bounded whatever the input), a worker that dies is one line. (What the
workers do to a chunk: test_encoding.py.)"""

from __future__ import annotations

import os
import signal
import time

import pytest

from transformer_cli.data.parallel import ChunkPool
from transformer_cli.errors import TfmError

_state: dict = {}


def _setup(tag: str) -> None:
    _state["tag"] = tag


def _slow_square(x: int) -> tuple[str, int, int]:
    time.sleep(0.02 * (x % 3))  # later chunks may finish first: order must not follow
    return _state["tag"], x * x, os.getpid()


def _die_on(x: int) -> int:
    if x == 5:
        os.kill(os.getpid(), signal.SIGKILL)  # as the kernel's OOM killer does
    return x


def test_results_come_in_order_from_workers_set_up_once():
    with ChunkPool(2, _setup, ("ready",)) as pool:
        out = list(pool.map(_slow_square, range(20)))
    assert [(tag, value) for tag, value, _ in out] == [("ready", x * x) for x in range(20)]
    assert len({pid for *_, pid in out}) == 2 and os.getpid() not in {pid for *_, pid in out}


def test_one_worker_runs_in_this_process():
    with ChunkPool(1, _setup, ("here",)) as pool:
        assert [pid for *_, pid in pool.map(_slow_square, range(3))] == [os.getpid()] * 3


def test_at_most_two_chunks_per_worker_are_in_flight():
    taken = []

    def chunks():
        for i in range(30):
            taken.append(i)
            yield i

    with ChunkPool(2, _setup, ("x",)) as pool:
        results = pool.map(_slow_square, chunks())
        for i, _ in enumerate(results):
            assert len(taken) <= i + 1 + 2 * 2  # read ahead: 2 workers x 2 chunks, no more
    assert taken == list(range(30))


def test_a_worker_that_dies_is_one_line():
    with pytest.raises(TfmError, match="a preprocessing worker process died"):
        with ChunkPool(2, _setup, ("x",)) as pool:
            list(pool.map(_die_on, range(10)))
