"""ChunkPool on its own: results in order, at most two chunks per worker in flight (memory
stays bounded whatever the input), a worker that dies is one line; and encode_chunk."""

from __future__ import annotations

import os
import signal
import time

import numpy as np
import pytest

from transformer_cli.data import encoding
from transformer_cli.data.encoding import EncodeSettings, encode_chunk
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


def test_encode_chunk_drops_long_pairs_counts_unknowns_and_spellings(tmp_path):
    from helpers import untrained_checkpoint

    from transformer_cli.checkpoint import Checkpoint

    state = Checkpoint.read(untrained_checkpoint(tmp_path / "m.pt")).tokenizer
    encoding.setup(state, EncodeSettings("uint16", train_max_len=20, count_spellings=True))
    sources = ["Ein Mann sieht einen Ball.", "Ein " * 30 + "Ball.", "Zwei Hunde ✈."]  # 16, 34, 14 ids
    targets = ["A man sees a ball.", "A ball.", "Two dogs ✈."]
    result = encode_chunk((sources, targets))
    assert result.too_long == 1 and len(result.chunk) == 2
    assert result.chunk.src_ids.dtype == np.uint16
    assert result.unknown[0] >= 1 and result.unknown[1] >= 1  # ✈ is in no vocabulary here
    assert result.spellings["Mann"] == result.spellings["Hunde"] == 1 and result.spellings["Ball"] == 1
    assert result.chunk.src_text == "".join(f"{s}\n" for s in (sources[0], sources[2])).encode()
