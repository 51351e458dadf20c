"""The batcher on its own (real models, a real decode thread, no server): requests share
batches within the token budget, each gets its own lines back, and each is decoded by the model
it was accepted with, even when a reload put another model beside it in the same batch (its
admission bound under scattered batch times: test_admission_bound.py)."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

import pytest
from helpers import sentence_pairs, untrained_checkpoint

from transformer_cli.api import open_translator
from transformer_cli.serving.batcher import Batcher
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
