"""The batcher on its own (real models, a real decode thread, no server): requests share
batches within the token budget, each gets its own lines back, and each is decoded by the model
it was accepted with, even when a reload put another model beside it in the same batch; and
when batch times scatter, the requests it admits are answered within serve.max_pending_s."""

from __future__ import annotations

import asyncio
import random
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from helpers import sentence_pairs, untrained_checkpoint

from transformer_cli.api import open_translator
from transformer_cli.config import DecodeConfig
from transformer_cli.inference.outputs import Output, Sources
from transformer_cli.serving.batcher import Batcher, Overloaded
from transformer_cli.serving.metrics import Metrics


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    folder = tmp_path_factory.mktemp("batcher")
    return (
        open_translator(untrained_checkpoint(folder / "a.pt"), "cpu"),
        open_translator(untrained_checkpoint(folder / "b.pt", d_ff=48, n_decoder_layers=2), "cpu"),
    )


def serve_requests(requests, batch_tokens: int) -> tuple[list, Metrics]:
    """Queue every (lines, options, model), then let the batcher form its batches; their
    outputs, in order, and the metrics."""
    metrics = Metrics()

    async def main() -> list:
        with ThreadPoolExecutor(1) as decode_thread:
            batcher = Batcher(decode_thread, batch_tokens, max_wait_s=0.05, metrics=metrics)
            answers = asyncio.gather(*(batcher.translate(*r) for r in requests))
            while batcher.queued < len(requests):  # tokenized, one after the other
                await asyncio.sleep(0.01)
            worker = asyncio.create_task(batcher.run())
            try:
                return await answers
            finally:
                worker.cancel()

    return asyncio.run(main()), metrics


def texts(output) -> list[str]:
    return [n_best[0].text for n_best in output.translations]


def batches_seen(metrics: Metrics) -> float | None:
    return metrics.registry.get_sample_value("tfm_batch_sentences_count")


def test_requests_share_batches_within_the_budget_and_get_their_own_lines(models):
    a, _ = models
    lines = [de for de, _ in sentence_pairs(12, seed=5)]
    chunks = [lines[i : i + 3] for i in range(0, 12, 3)]  # four requests of three sentences
    requests = [(chunk, a.options(), a) for chunk in chunks]
    roomy, roomy_metrics = serve_requests(requests, batch_tokens=10_000)
    assert [texts(o) for o in roomy] == [texts(a.translate_n_best(c)) for c in chunks]
    assert batches_seen(roomy_metrics) == 1  # all four in one batch
    one_each = max(a.encode(c).tokens for c in chunks)
    tight, tight_metrics = serve_requests(requests, batch_tokens=one_each)
    assert [texts(o) for o in tight] == [texts(o) for o in roomy]
    assert batches_seen(tight_metrics) == 4  # the budget holds one request per batch


def test_each_request_is_decoded_by_the_model_it_was_accepted_with(models):
    a, b = models
    lines = [de for de, _ in sentence_pairs(4, seed=6)]
    assert texts(a.translate_n_best(lines)) != texts(b.translate_n_best(lines))
    (by_a, by_b, greedy_a), metrics = serve_requests(
        [(lines, a.options(), a), (lines, b.options(), b), (lines, a.options(beam_size=1), a)], batch_tokens=10_000
    )
    assert batches_seen(metrics) == 1  # one batch, decoded in three groups
    assert texts(by_a) == texts(a.translate_n_best(lines))
    assert texts(by_b) == texts(b.translate_n_best(lines))
    assert texts(greedy_a) == texts(a.translate_n_best(lines, a.options(beam_size=1)))


class Scattered:
    """A stand-in for a model whose batches take 0.5 to 1.9 times their usual time, as the
    sentences a batch holds make a real model's do (measured with wrk on base.yaml's model):
    10 tokens a line, `scale` x (20 ms a batch plus 4 ms a line), times a seeded random factor."""

    def __init__(self, seed: int, scale: float = 1.0):
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
    """Admitting every request whose predicted wait is just within the bound answers 11-16% of
    them late here (18-31% at a third of this scale); with the margin learnt from the
    predictions' errors, 3-5%, also beside a parallel test run. Late answers come in bursts (one
    slow batch delays all queued behind it) and a busy machine adds stalls of its own, so the
    two are compared side by side and the share is bounded loosely."""
    pinned = admitted_and_late(learn_margin=False, seconds=6.0, scale=3.0)  # slow enough that a busy
    learnt = admitted_and_late(learn_margin=True, seconds=6.0, scale=3.0)  # machine's stalls matter little
    assert min(pinned[0], learnt[0]) >= 200 and learnt[2], (pinned, learnt)
    late_share = learnt[1] / learnt[0]
    assert late_share <= 0.10 and late_share <= 0.6 * pinned[1] / pinned[0], (pinned, learnt)
