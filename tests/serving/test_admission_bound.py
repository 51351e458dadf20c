"""The batcher's admission bound, timed (so it runs in the serial phase, alone: a neighbour's
stalls make answers late that no prediction could foresee): when batch times scatter, the
requests it admits are answered within serve.max_pending_s."""

from __future__ import annotations

import asyncio
import random
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from transformer_cli.config import DecodeConfig
from transformer_cli.inference.outputs import Output, Sources
from transformer_cli.serving.batcher import Batcher, Overloaded
from transformer_cli.serving.metrics import Metrics


class Scattered:
    """A stand-in for a model whose batches take 0.5 to 1.9 times their usual time, as the
    sentences a batch holds make a real model's do (measured with wrk on base.yaml's model):
    10 tokens a line, `scale` x (20 ms a batch plus 4 ms a line), times a seeded random factor."""

    def __init__(self, seed: int, scale: float):
        self.rng = random.Random(seed)
        self.scale = scale

    def encode(self, lines: list[str], options: DecodeConfig, count: bool) -> Sources:
        return Sources(len(lines), list(range(len(lines))), [[0] * 11 for _ in lines], [])

    def translate_encoded(self, sources: Sources, options: DecodeConfig) -> Output:
        time.sleep(self.scale * (0.02 + 0.004 * sources.n_lines) * self.rng.uniform(0.5, 1.9))
        return Output([[] for _ in range(sources.n_lines)], [])


def admitted_and_late(learn_margin: bool, seconds: float, scale: float) -> tuple[int, int, int]:
    """48 clients that send again as soon as they are answered (30 ms after a 503) for
    `seconds`, to a `Scattered` model of this `scale` under a bound of `scale` x 0.3 s:
    (requests admitted, of them answered after the bound, requests shed). `learn_margin` off:
    the admission check takes the predicted wait as it is (margin 1)."""
    model: Any = Scattered(seed=3, scale=scale)  # the two methods Batcher calls on a Translator
    options, bound_s = DecodeConfig(), 0.3 * scale

    async def client(batcher: Batcher, until: float, waits: list[float], shed: list[int]) -> None:
        while time.monotonic() < until:
            asked = time.monotonic()
            try:
                await batcher.translate(["ein satz"], options, model)
            except Overloaded:
                shed.append(1)
                await asyncio.sleep(0.03)
                continue
            waits.append(time.monotonic() - asked)

    async def main() -> tuple[list[float], list[int]]:
        waits: list[float] = []
        shed: list[int] = []
        with ThreadPoolExecutor(1) as decode_thread, ThreadPoolExecutor(1) as tokenize_thread:
            batcher = Batcher(decode_thread, 10_000, 0.005, Metrics(), tokenize=tokenize_thread, max_pending_s=bound_s)
            if not learn_margin:
                batcher.wait_errors = None
            worker = asyncio.create_task(batcher.run())
            until = time.monotonic() + seconds
            await asyncio.gather(*(client(batcher, until, waits, shed) for _ in range(48)))
            worker.cancel()
        return waits, shed

    waits, shed = asyncio.run(main())
    return len(waits), sum(wait > bound_s for wait in waits), len(shed)


def test_admitted_requests_are_answered_within_the_bound_when_batch_times_scatter():
    """Admitting every request whose predicted wait is just within the bound (the margin
    pinned at 1, as before the learnt margin) answers about 11% of them late; the learnt margin
    about 3% (alone on the 2-core EPYC: `admitted_and_late(False, 6.0, 3.0)` and `(True, ...)`
    give the counts). Late answers come in bursts (one slow batch delays all queued behind it)
    and a busy machine adds stalls of its own (one CI run in the parallel phase: 13% late with
    the margin, 11% pinned), so the two are compared side by side, in the serial phase, and the
    share is bounded loosely."""
    pinned = admitted_and_late(learn_margin=False, seconds=5.0, scale=3.0)  # at 3x: a stall of the
    learnt = admitted_and_late(learn_margin=True, seconds=5.0, scale=3.0)  # machine weighs a third as much
    assert min(pinned[0], learnt[0]) >= 200 and learnt[2], (pinned, learnt)
    late_share = learnt[1] / learnt[0]
    assert late_share <= 0.10 and late_share <= 0.6 * pinned[1] / pinned[0], (pinned, learnt)
