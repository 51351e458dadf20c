"""Dynamic batching: concurrent requests share decoding batches.

Requests wait in a queue. A batch takes the waiting requests while their source tokens fit
`batch_tokens` (one request alone may exceed it), is decoded on the decode thread, off the
event loop, and each request gets its own lines back. While one batch decodes, the next one
fills up, so batches grow with the load.

Before decoding, a batch waits for company, at most `max_wait_s`, and only while requests are
"owed": the clients answered by the previous batch that have not sent anything since. A lone
client therefore never waits, and clients that send again as soon as they are answered end up
in one batch instead of splitting into two groups that take turns.

Requests with different decoding options share a batch window and are decoded group by group.
Each request is decoded by the model it was accepted with (its options and token count came
from that model's defaults): after a hot reload, requests already queued finish on the old
model and new ones go to the new model.

POST /attention (one sentence, its translation and cross-attention) goes through the same
queue as a translation, admitted by its own bound, and is decoded alone in the batch that takes
it (`Translator.attention`, or the model's attention over a correction the translation memory
holds: serving/corrections.py).

Admission control bounds the time an admitted request waits, from the moment the server began
to read it (serving/guard.py notes it; the batcher's own arrival where not given: reading and
parsing count) to its answer, by `max_pending_s` seconds (serve.max_pending_s). The wait is
predicted from the batches' measured times: what is left of the batch in flight (its
predicted time less what it has taken so far), then the batches that the requests ahead of it
(queued, or being tokenized: those hold their likely share, the recent tokens per line, so that
a burst does not pass the check together) and the request itself fill. A batch's time is fitted
to the recent batches as a fixed part plus a part per source token (`BatchTimes`), in wall time
from when the batch begins to form (the previous batch's end, or its first request's arrival
after an idle spell) to its answers: the wait for company, the event loop's other work (shed
requests, tokenizing, answering) and whatever else takes the CPU count, so the times are what a
queued client sees, and they grow when a flood of shed requests slows decoding. A request is
also charged the time it has already waited to be tokenized, and it is admitted only if the
requests queued before it still finish within their own bound (it may join their batch and
make it longer). The prediction is right on average but scattered around it (a batch's time
depends on what it holds), so it is first multiplied by a margin taken from how far the recent
admitted requests' waits exceeded theirs (`WaitErrors`, serving/wait_prediction.py): admitted
requests are answered within the bound, not only half of them. The first requests are
predicted from a warm-up batch timed before the server listens (`Batcher.warm_up`); a batcher
that has timed no batch admits nothing beside a request alone.

A request that would wait past the bound is answered at once with `Overloaded` (HTTP 503 and
Retry-After, counted in /metrics), rather than queued behind work it would wait seconds for;
when the admitted work alone is at the bound it is answered before it is tokenized
(serving/guard.py). A request alone is always admitted, however long it takes. What is
admitted is answered, once. The bound is a prediction, not a deadline: a request admitted just
before decoding slows down (longer sentences than the recent ones, a reload to a slower model,
another process taking the CPU) can wait longer, until the measured times and the margin
catch up.

Requests are tokenized on a thread of their own (`tokenize`), never on the event loop, while
the decode thread may be translating (api.Translator: encoding may run beside a translation).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import math
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import astuple, dataclass
from typing import Any

from ..api import Attention, Translator
from ..config import DecodeConfig
from ..host.allocator import release_freed_memory
from ..inference.outputs import NearMatches, Output, Sources
from .metrics import Metrics
from .wait_prediction import BatchTimes, WaitErrors

log = logging.getLogger("tfm")
IDLE_S = 2.0  # without requests for this long after a batch, freed memory goes back to the OS
WARM_UP_LINES = 4  # of the batch timed at start (`Batcher.warm_up`)
WARM_UP_TOKENS = 16  # a warm-up line's tokens: the source vocabulary's first, as a typical sentence has


class Overloaded(Exception):
    """The work admitted is at its bound: answer 503 now, and retry after `retry_after_s`."""

    def __init__(self, message: str, retry_after_s: int):
        super().__init__(message)
        self.retry_after_s = retry_after_s


@dataclass
class Job:
    sources: Sources  # the request's lines, tokenized once, by `model`, with `options`
    options: DecodeConfig
    model: Translator  # the one the request was accepted with, which decodes it
    done: asyncio.Future[Output | Attention]  # the lines' translations (Attention for an attention job)
    arrived: float  # time.monotonic() when the server began to read the request (the bound counts from it)
    attend: Callable[[], Attention] | None = None  # POST /attention: its one line's cross-attention, to decode

    @property
    def tokens(self) -> int:
        return self.sources.tokens


class Batcher:
    def __init__(
        self,
        executor: Executor,
        batch_tokens: int,
        max_wait_s: float,
        metrics: Metrics,
        tokenize: Executor | None = None,
        max_pending_s: float | None = None,
        attention_slots: int = 1,
    ):
        self._executor, self._metrics = executor, metrics
        self._tokenize = tokenize or executor
        self.batch_tokens, self.max_wait_s = batch_tokens, max_wait_s
        self.max_pending_s = max_pending_s
        self.attention_slots = attention_slots
        self._attention = 0  # attention requests admitted and not yet answered
        self._queue: deque[Job] = deque()
        self._arrived = asyncio.Event()
        self._owed = 0  # requests answered by the last batch whose clients have not sent again
        self._decoded_since_idle = False
        self.pending_tokens = 0  # of the requests admitted and not yet answered
        self.batch_times = BatchTimes()  # for the bound and Retry-After
        self.wait_errors = WaitErrors(max_pending_s) if max_pending_s is not None else None
        if self.wait_errors is not None:
            metrics.admission_margin.set(self.wait_errors.margin)
        self._tokenizing = 0  # source tokens the requests being tokenized are likely to have
        self._in_flight = 0  # source tokens of the batch being formed or decoded (0: none)
        self._in_flight_began = 0.0  # time.monotonic() when it began to form
        self._tokens_per_line = 16.0  # source tokens of a request's line, smoothed

    async def warm_up(self, model: Translator, options: DecodeConfig) -> None:
        """Translate a line of `model`'s own vocabulary once (a backend sets itself up in its
        first call), then time a batch of WARM_UP_LINES of it, before the server listens: the
        bound then predicts even the first requests' waits from a measured batch instead of
        admitting a flood it has no time for. They are predicted long rather than short: one
        small batch's time is taken as proportional to its tokens (its fixed part, counted per
        token, overstates larger batches) and `options` are the slowest a request may ask for
        (the largest beam), until the requests' own batches are timed."""
        loop = asyncio.get_running_loop()
        line = _warm_up_line(model)
        first, timed = (model.encode([line] * lines, options, True) for lines in (1, WARM_UP_LINES))
        await loop.run_in_executor(self._executor, model.translate_encoded, first, options)
        started = time.monotonic()
        await loop.run_in_executor(self._executor, model.translate_encoded, timed, options)
        took = time.monotonic() - started
        self.batch_times.add(timed.tokens, took)
        log.info("warm-up batch: %d lines, %d source tokens, %.3f s", timed.n_lines, timed.tokens, took)

    @property
    def queued(self) -> int:
        """Requests tokenized and waiting for a batch."""
        return len(self._queue)

    async def translate(
        self,
        lines: list[str],
        options: DecodeConfig,
        model: Translator,
        received: float | None = None,
        near: NearMatches | None = None,
    ) -> Output:
        """Queue `lines` (text serving/requests.py has checked) for the next batches, to be
        decoded by `model` with `options` (built from that model's defaults); returns their
        Output, or raises Overloaded when the work admitted is at its bound, counted from
        `received` (time.monotonic() when the server began to read the request; now if None).
        The lines are tokenized once, off the event loop: for the bound, the token budget and
        decoding. `near`: each line's near-matches and how they are mixed in (inference/near.py)."""
        output: Output = await self._submit(lines, options, model, None, received, near)
        return output

    async def attention(
        self, line: str, options: DecodeConfig, model: Translator, attend: Callable[[], Attention]
    ) -> Attention:
        """`attend()`, the cross-attention of `line` by `model` with `options`, queued and decoded
        as a translation of `line` is, but admitted by its own bound: at most `attention_slots` at
        once (Overloaded past it), and not counted in the translations' bound, which a flood of
        them would otherwise fill."""
        if (why := self._attention_refusal()) is not None:
            raise Overloaded(*why)
        self._attention += 1
        try:
            attention: Attention = await self._submit([line], options, model, attend, None)
        finally:
            self._attention -= 1
        return attention

    async def _submit(
        self,
        lines: list[str],
        options: DecodeConfig,
        model: Translator,
        attend: Callable[[], Attention] | None,
        received: float | None,
        near: NearMatches | None = None,
    ) -> Any:
        """Tokenize, admit (or raise Overloaded), queue, and wait for the job's answer. An
        attention job was admitted by its own bound (`attention`) and counts in neither."""
        bounded = attend is None  # a translation: the bound on the waiting work admits it
        if bounded and (why := self.busy()) is not None:  # the admitted work alone is at the bound
            raise Overloaded(*why)
        arrived = time.monotonic() if received is None else received
        loop = asyncio.get_running_loop()
        # While it is tokenized, the request holds its likely share of the bound, so that the
        # requests arriving meanwhile see it (else a burst passes `busy` together).
        guess = max(1, round(self._tokens_per_line * len(lines))) if bounded else 0
        self.pending_tokens += guess
        self._tokenizing += guess
        try:
            sources = await loop.run_in_executor(self._tokenize, model.encode, lines, options, True)
            if near is not None:
                sources.examples, sources.near = near.examples, near.settings
        finally:
            self.pending_tokens -= guess
            self._tokenizing -= guess
        tokens = sources.tokens if bounded else 0
        if bounded:
            self._tokens_per_line += 0.1 * (tokens / max(1, len(lines)) - self._tokens_per_line)
        admitted_at = time.monotonic()
        why, predicted_s = self._admit(tokens, arrived) if bounded else (None, None)
        if why is not None:
            raise Overloaded(*why)
        self.pending_tokens += tokens
        try:
            job = Job(sources, options, model, loop.create_future(), arrived, attend)
            self._queue.append(job)
            self._owed = max(0, self._owed - 1)
            self._arrived.set()
            answer = await job.done
        finally:
            self.pending_tokens -= tokens
        if predicted_s is not None and self.wait_errors is not None:
            self.wait_errors.add(predicted_s, time.monotonic() - admitted_at)
            self._metrics.admission_margin.set(self.wait_errors.margin)
        return answer

    def busy(self, path: str = "/translate") -> tuple[str, int] | None:
        """None while a request to `path` may still be admitted; else the message and
        Retry-After seconds of its 503 (counted as shed): the admitted work alone is at its
        bound, so the request need not even be read (serving/guard.py answers it)."""
        if path == "/attention":
            return self._attention_refusal()
        return self._admit(0, time.monotonic())[0]

    def _attention_refusal(self) -> tuple[str, int] | None:
        """None while an attention request may be admitted; else why not (counted as shed)."""
        if self._attention < self.attention_slots:
            return None
        self._metrics.shed.inc()
        return (
            f"the server is answering {self._attention} attention request(s) "
            f"(serve.attention_slots={self.attention_slots}), which never delay translations; retry in 1 s",
            1,
        )

    def _admit(self, tokens: int, arrived: float) -> tuple[tuple[str, int] | None, float | None]:
        """Whether a request of `tokens` source tokens that the server began to read at
        `arrived` is admitted: (None, or why not, counted as shed; its predicted wait in
        seconds, `_wait_s`, None where none was needed or could be made). It is if it would be
        answered within the bound, its predicted wait times the margin of the recent
        predictions' errors, and so would the requests queued before it (it joins their batch,
        or a later one)."""
        if self.max_pending_s is None or not self.pending_tokens:  # a request alone is admitted
            return None, None
        wait_s = self._wait_s(tokens)
        if wait_s is not None:  # else no batch is timed (no `warm_up`): nothing beside a request alone
            oldest = min(arrived, self._queue[0].arrived) if self._queue else arrived
            margin = self.wait_errors.margin if self.wait_errors is not None else 1.0
            if time.monotonic() - oldest + wait_s * margin <= self.max_pending_s:
                return None, wait_s
        self._metrics.shed.inc()
        retry_after_s = 1 if wait_s is None else min(60, max(1, math.ceil(wait_s)))
        why = (
            f"the server is busy: {self.pending_tokens} source tokens are waiting or being translated "
            f"(serve.max_pending_s={self.max_pending_s:g}); retry in {retry_after_s} s"
        )
        return (why, retry_after_s), wait_s

    def _wait_s(self, tokens: int) -> float | None:
        """Predicted seconds from now until a request of `tokens` source tokens queued now is
        answered: what is left of the batch in flight (its predicted time less what it has
        taken), then the batches that the requests ahead of it and it fill. A batch in flight
        that has run past its prediction says the machine is slower now than the recent batches
        were: the batches after it are predicted as much slower. None before a batch has been
        timed."""
        ahead = self._tokenizing + sum(job.tokens for job in self._queue) + tokens
        wait_s = self.batch_times.predict(ahead, max(1, math.ceil(ahead / self.batch_tokens)))
        if wait_s is None or not self._in_flight:
            return wait_s
        in_flight_s = self.batch_times.predict(self._in_flight) or 0.0
        taken = time.monotonic() - self._in_flight_began
        if taken <= in_flight_s:
            return wait_s + in_flight_s - taken
        return wait_s * taken / max(in_flight_s, 1e-3)

    def _take(self, batch: list[Job], tokens: int) -> tuple[int, bool]:
        """Move queued jobs into `batch` while they fit; returns (tokens, whether it is full)."""
        while self._queue:
            job = self._queue[0]
            if batch and tokens + job.tokens > self.batch_tokens:
                return tokens, True
            self._queue.popleft()
            if job.done.done():  # its client went away
                continue
            batch.append(job)
            tokens += job.tokens
        return tokens, tokens >= self.batch_tokens

    async def run(self) -> None:
        """Form and decode batches forever (cancelled when the server stops)."""
        loop = asyncio.get_running_loop()
        while True:
            while not self._queue:
                self._arrived.clear()
                try:
                    await asyncio.wait_for(self._arrived.wait(), IDLE_S if self._decoded_since_idle else None)
                except asyncio.TimeoutError:  # idle: glibc keeps what decoding freed until told
                    await loop.run_in_executor(self._executor, release_freed_memory)
                    self._decoded_since_idle = False
            self._in_flight_began = time.monotonic()  # the previous batch's end, or this one's first arrival
            batch: list[Job] = []
            deadline = loop.time() + self.max_wait_s
            self._in_flight, full = self._take(batch, 0)
            while not full and self._owed and (left := deadline - loop.time()) > 0:
                self._arrived.clear()
                try:
                    await asyncio.wait_for(self._arrived.wait(), left)
                except asyncio.TimeoutError:
                    break
                self._in_flight, full = self._take(batch, self._in_flight)
            if batch:
                await self._answer(batch)
                self.batch_times.add(self._in_flight, time.monotonic() - self._in_flight_began)
                self._owed = len(batch)
                self._decoded_since_idle = True
            self._in_flight = 0

    async def _answer(self, batch: list[Job]) -> None:
        try:
            await self._decode(batch)
        except Exception as e:  # a bug outside decoding: 500s, and the server keeps serving
            log.exception("handling a batch failed")
            for job in batch:
                if not job.done.done():
                    job.done.set_exception(e)

    async def _decode(self, batch: list[Job]) -> None:
        # one decoding call per (model, options), and one per attention job
        groups: dict[tuple[int, str, int], list[Job]] = {}
        for job in batch:  # (the options' repr: some of their fields are lists)
            alone = id(job) if job.attend is not None else 0
            groups.setdefault((id(job.model), repr(job.options), alone), []).append(job)
        started = time.perf_counter()
        loop = asyncio.get_running_loop()
        for jobs in groups.values():
            try:
                outputs = await loop.run_in_executor(self._executor, _decode_group, jobs)
            except Exception as e:  # a bug, not the client's doing: answer 500, keep serving
                log.exception("decoding a batch failed")
                for job in jobs:
                    if not job.done.done():
                        job.done.set_exception(e)
                continue
            for job, out in zip(jobs, outputs):
                if not job.done.done():
                    job.done.set_result(out)
        n = sum(job.sources.n_lines for job in batch)
        self._metrics.batch_sentences.observe(n)
        self._metrics.batch_seconds.observe(time.perf_counter() - started)
        self._metrics.sentences.inc(n)


def _warm_up_line(model: Translator) -> str:
    """The source vocabulary's first WARM_UP_TOKENS tokens but its specials (the most frequent,
    as tfm builds vocabularies) as a line: text the model knows, whatever its languages."""
    tokenizer = model.backend.tokenizers.src
    specials = set(astuple(tokenizer.ids))
    ids = (i for i in range(tokenizer.vocab_size) if i not in specials)
    return tokenizer.decode(list(itertools.islice(ids, WARM_UP_TOKENS)))


def _decode_group(jobs: list[Job]) -> list[Output | Attention]:
    """Runs on the decode thread: all lines of `jobs` (same model and options) in one call,
    split back; an attention job's one line alone."""
    first = jobs[0]
    if first.attend is not None:
        return [first.attend()]
    out = first.model.translate_encoded(Sources.concat([job.sources for job in jobs]), first.options)
    outputs: list[Output | Attention] = []
    start = 0
    for job in jobs:
        end = start + job.sources.n_lines
        truncated = [(i - start, n) for i, n in out.truncated if start <= i < end]
        terms, near = out.terms[start:end] if out.terms else [], out.near[start:end] if out.near else []
        outputs.append(Output(out.translations[start:end], truncated, terms, near))
        start = end
    return outputs
