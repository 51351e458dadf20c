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

Admission control: the requests admitted and not yet answered (waiting or decoding) stay
within `max_pending_s` seconds of decoding (serve.max_pending_s): their source tokens, at the
decoding capacity measured in tokens/s, which follows the backend, its threads and the beam.
The capacity is that of the fastest recent batches (it decays by 1% a batch), not their mean:
batches kept small by the bound decode fewer tokens a second, and a mean would shrink the
bound with them, down to one request. Before the first batch the bound is one batch
(`batch_tokens`). A request that would go past it is answered at once with `Overloaded`
(HTTP 503 and Retry-After, counted in /metrics), rather than queued behind work it would
wait seconds for; when the admitted work alone is at the bound it is answered before it is
tokenized. A request alone is always admitted. What is admitted is answered, once.

Requests are tokenized on a thread of their own (`tokenize`), never on the event loop, while
the decode thread may be translating (api.Translator: encoding may run beside a translation).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections import deque
from concurrent.futures import Executor
from dataclasses import dataclass

from ..allocator import release_freed_memory
from ..api import Output, Sources, Translator
from ..config import DecodeConfig
from .metrics import Metrics

log = logging.getLogger("tfm")
IDLE_S = 2.0  # without requests for this long after a batch, freed memory goes back to the OS
CAPACITY_DECAY = 0.99  # per batch: the capacity estimate forgets a fast batch within ~100 batches


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
    done: asyncio.Future  # -> Output: the lines' translations

    @property
    def tokens(self) -> int:
        return self.sources.tokens


class Batcher:
    def __init__(self, executor: Executor, batch_tokens: int, max_wait_s: float, metrics: Metrics,
                 tokenize: Executor | None = None, max_pending_s: float | None = None):
        self._executor, self._metrics = executor, metrics
        self._tokenize = tokenize or executor
        self.batch_tokens, self.max_wait_s = batch_tokens, max_wait_s
        self.max_pending_s = max_pending_s
        self._queue: deque[Job] = deque()
        self._arrived = asyncio.Event()
        self._owed = 0  # requests answered by the last batch whose clients have not sent again
        self._decoded_since_idle = False
        self.pending_tokens = 0  # of the requests admitted and not yet answered
        self._tokens_per_s = 0.0  # decoded, smoothed over batches: for Retry-After
        self._capacity = 0.0  # tokens/s of the fastest recent batches: for the bound
        self._tokens_per_line = 16.0  # source tokens of a request's line, smoothed

    @property
    def queued(self) -> int:
        """Requests tokenized and waiting for a batch."""
        return len(self._queue)

    async def translate(self, lines: list[str], options: DecodeConfig, model: Translator) -> Output:
        """Queue `lines` (text serving/requests.py has checked) for the next batches, to be
        decoded by `model` with `options` (built from that model's defaults); returns their
        Output, or raises Overloaded when the work admitted is at its bound. The lines are
        tokenized once, off the event loop: for the bound, the token budget and decoding."""
        if (why := self.busy()) is not None:  # the admitted work alone is at the bound
            raise Overloaded(*why)
        loop = asyncio.get_running_loop()
        # While it is tokenized, the request holds its likely share of the bound, so that the
        # requests arriving meanwhile see it (else a burst passes `busy` together).
        guess = max(1, round(self._tokens_per_line * len(lines)))
        self.pending_tokens += guess
        try:
            sources = await loop.run_in_executor(self._tokenize, model.encode, lines, options, True)
        finally:
            self.pending_tokens -= guess
        tokens = sources.tokens
        self._tokens_per_line += 0.1 * (tokens / max(1, len(lines)) - self._tokens_per_line)
        self._admit(tokens)
        self.pending_tokens += tokens
        try:
            job = Job(sources, options, model, loop.create_future())
            self._queue.append(job)
            self._owed = max(0, self._owed - 1)
            self._arrived.set()
            return await job.done
        finally:
            self.pending_tokens -= tokens

    def busy(self) -> tuple[str, int] | None:
        """None while a request may still be admitted; else the message and Retry-After seconds
        of its 503 (counted as shed): the admitted work alone is at the bound, so the request
        need not even be read (serving/guard.py answers it)."""
        return self._refusal(0)

    def _admit(self, tokens: int) -> None:
        """Raise Overloaded if `tokens` more would pass the bound."""
        if (why := self._refusal(tokens)) is not None:
            raise Overloaded(*why)

    def _refusal(self, tokens: int) -> tuple[str, int] | None:
        if self.max_pending_s is None or not self.pending_tokens:  # a request alone is admitted
            return None
        bound = self.max_pending_s * self._capacity if self._capacity else self.batch_tokens
        if self.pending_tokens + tokens <= bound:
            return None
        self._metrics.shed.inc()
        retry_after_s = self._retry_after_s()
        return (f"the server is busy: {self.pending_tokens} source tokens are waiting or being translated "
                f"(serve.max_pending_s={self.max_pending_s:g}); retry in {retry_after_s} s", retry_after_s)

    def _retry_after_s(self) -> int:
        """Seconds until the work admitted now is likely done (1 to 60)."""
        if self._tokens_per_s <= 0:
            return 1
        return min(60, max(1, math.ceil(self.pending_tokens / self._tokens_per_s)))

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
            batch: list[Job] = []
            deadline = loop.time() + self.max_wait_s
            tokens, full = self._take(batch, 0)
            while not full and self._owed and (left := deadline - loop.time()) > 0:
                self._arrived.clear()
                try:
                    await asyncio.wait_for(self._arrived.wait(), left)
                except asyncio.TimeoutError:
                    break
                tokens, full = self._take(batch, tokens)
            if batch:
                try:
                    await self._decode(batch)
                except Exception as e:  # a bug outside decoding: 500s, and the server keeps serving
                    log.exception("handling a batch failed")
                    for job in batch:
                        if not job.done.done():
                            job.done.set_exception(e)
                self._owed = len(batch)
                self._decoded_since_idle = True

    async def _decode(self, batch: list[Job]) -> None:
        groups: dict[tuple[int, str], list[Job]] = {}  # one decoding call per (model, options)
        for job in batch:  # (the options' repr: some of their fields are lists)
            groups.setdefault((id(job.model), repr(job.options)), []).append(job)
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
        seconds = time.perf_counter() - started
        self._metrics.batch_sentences.observe(n)
        self._metrics.batch_seconds.observe(seconds)
        self._metrics.sentences.inc(n)
        rate = sum(job.tokens for job in batch) / max(seconds, 1e-6)
        self._tokens_per_s = rate if not self._tokens_per_s else 0.8 * self._tokens_per_s + 0.2 * rate
        self._capacity = max(rate, CAPACITY_DECAY * self._capacity)


def _decode_group(jobs: list[Job]) -> list[Output]:
    """Runs on the decode thread: all lines of `jobs` (same model and options) in one call,
    split back."""
    out = jobs[0].model.translate_encoded(Sources.concat([job.sources for job in jobs]), jobs[0].options)
    outputs, start = [], 0
    for job in jobs:
        end = start + job.sources.n_lines
        truncated = [(i - start, n) for i, n in out.truncated if start <= i < end]
        outputs.append(Output(out.translations[start:end], truncated))
        start = end
    return outputs
