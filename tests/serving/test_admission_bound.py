"""The batcher's admission bound when batch times scatter: the requests it admits are answered
within serve.max_pending_s. Run in virtual time (`VirtualTime`): the batches take the times a
seeded stand-in model draws and nothing else does, so the test asserts what admission predicts
and admits, not how fast or how busy the machine running it is. (Timed in wall time beside a
busy neighbour, it failed on stalls no prediction could foresee: the learnt margin's share of
late answers went from 4% to 22% with four CPU hogs on two cores.)"""

from __future__ import annotations

import asyncio
import concurrent.futures
import random
import selectors
import types
from typing import Any

from transformer_cli.config import DecodeConfig
from transformer_cli.inference.outputs import Output, Sources
from transformer_cli.serving import batcher as batcher_module
from transformer_cli.serving.batcher import Batcher, Overloaded
from transformer_cli.serving.metrics import Metrics

BOUND_S = 0.3  # serve.max_pending_s of these runs
CLIENTS = 48


class _SkippingSelector(selectors.DefaultSelector):
    """Waits of no time at all: what is ready now, and a wait with a timeout moves the clock of
    `loop` by the timeout instead (nothing real is awaited in virtual time)."""

    def __init__(self, loop: VirtualTime):
        super().__init__()
        self.loop = loop

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        ready = super().select(0)
        if not ready and timeout:
            self.loop.now += timeout
        elif not ready and timeout is None:
            raise RuntimeError("every task waits for something that never comes")
        return ready


class VirtualTime(asyncio.SelectorEventLoop):
    """An event loop whose clock moves only when every task waits: to the next timer at once."""

    def __init__(self) -> None:
        self.now = 0.0
        super().__init__(_SkippingSelector(self))

    def time(self) -> float:
        return self.now


class VirtualThread(concurrent.futures.Executor):
    """A worker thread in `loop`'s virtual time: a call runs at once and is done, after the
    calls before it, the virtual seconds it `spend`s later."""

    def __init__(self, loop: VirtualTime):
        self.loop = loop
        self.free_at = 0.0
        self._spent = 0.0

    def spend(self, seconds: float) -> None:
        self._spent += seconds

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[Any]:
        done: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self._spent = 0.0
        result = fn(*args, **kwargs)
        self.free_at = max(self.loop.time(), self.free_at) + self._spent
        self.loop.call_at(self.free_at, done.set_result, result)
        return done


class Scattered:
    """A stand-in for a model whose batches take 0.5 to 1.9 times their usual time, as the
    sentences a batch holds make a real model's do (measured with wrk on base.yaml's model):
    10 tokens a line, 20 ms a batch plus 4 ms a line, times a seeded random factor, spent on
    the decode thread."""

    def __init__(self, seed: int, decode_thread: VirtualThread):
        self.rng = random.Random(seed)
        self.decode_thread = decode_thread

    def encode(self, lines: list[str], options: DecodeConfig, count: bool) -> Sources:
        return Sources(len(lines), list(range(len(lines))), [[0] * 11 for _ in lines], [])

    def translate_encoded(self, sources: Sources, options: DecodeConfig) -> Output:
        self.decode_thread.spend((0.02 + 0.004 * sources.n_lines) * self.rng.uniform(0.5, 1.9))
        return Output([[] for _ in range(sources.n_lines)], [])


async def _client(batcher: Batcher, model: Any, until: float, waits: list[float], shed: list[int]) -> None:
    """Sends again as soon as it is answered, 30 ms after a 503."""
    loop = asyncio.get_running_loop()
    while loop.time() < until:
        asked = loop.time()
        try:
            await batcher.translate(["ein satz"], DecodeConfig(), model)
        except Overloaded:
            shed.append(1)
            await asyncio.sleep(0.03)
            continue
        waits.append(loop.time() - asked)


async def _load(learn_margin: bool, seconds: float) -> tuple[list[float], list[int]]:
    """CLIENTS clients for `seconds` against a batcher bound by BOUND_S, its model `Scattered`:
    the admitted requests' waits, and a 1 per 503."""
    loop: Any = asyncio.get_running_loop()
    decode_thread, tokenize_thread = VirtualThread(loop), VirtualThread(loop)
    model: Any = Scattered(seed=3, decode_thread=decode_thread)  # the two methods Batcher calls on a Translator
    batcher = Batcher(decode_thread, 10_000, 0.005, Metrics(), tokenize=tokenize_thread, max_pending_s=BOUND_S)
    if not learn_margin:
        batcher.wait_errors = None
    worker = asyncio.create_task(batcher.run())
    waits: list[float] = []
    shed: list[int] = []
    until = loop.time() + seconds
    await asyncio.gather(*(_client(batcher, model, until, waits, shed) for _ in range(CLIENTS)))
    worker.cancel()
    await asyncio.gather(worker, return_exceptions=True)
    return waits, shed


def admitted_and_late(monkeypatch: Any, learn_margin: bool, seconds: float) -> tuple[int, int, int]:
    """(requests admitted, of them answered after BOUND_S, requests shed) in `seconds` of
    virtual time; `learn_margin` off: the admission check takes the predicted wait as it is
    (margin 1)."""
    loop = VirtualTime()
    with monkeypatch.context() as patched:
        patched.setattr(batcher_module, "time", types.SimpleNamespace(monotonic=loop.time, perf_counter=loop.time))
        try:
            waits, shed = loop.run_until_complete(_load(learn_margin, seconds))
        finally:
            loop.close()
    return len(waits), sum(wait > BOUND_S for wait in waits), len(shed)


def test_admitted_requests_are_answered_within_the_bound_when_batch_times_scatter(monkeypatch):
    """Admitting every request whose predicted wait is just within the bound (the margin
    pinned at 1, as before the learnt margin) answers a third of them late; the learnt margin
    about 3% (2.5-4.5% over the stand-in's seeds 1-8, 28-41% pinned: 20 virtual seconds, about
    3,000 admitted requests a run). Late answers come in bursts: one slow batch delays all
    queued behind it."""
    pinned = admitted_and_late(monkeypatch, learn_margin=False, seconds=20.0)
    learnt = admitted_and_late(monkeypatch, learn_margin=True, seconds=20.0)
    assert min(pinned[0], learnt[0]) >= 2000 and learnt[2], (pinned, learnt)
    late_share = learnt[1] / learnt[0]
    assert late_share <= 0.06 and late_share <= 0.25 * pinned[1] / pinned[0], (pinned, learnt)
