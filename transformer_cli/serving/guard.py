"""ASGI middleware around every request: the bearer-token check, the per-request metrics, the
503 of a request that uvicorn cancels when serve.shutdown_grace_s runs out, and the 503 of a
translation or attention request that arrives while the admitted work is at its bound (load
shedding).

A shed request is answered here, before routing, parsing or tokenizing, and after a pause
(`ShedPace`; app.py pauses the 503s the batcher raises the same way). Clients that send again
as soon as they are answered (load generators, naive retry loops) would otherwise turn the
rejections into the server's whole work: measured with wrk at 64 connections, immediate 503s
(about 800 a second) cut torch decoding on the other core to a quarter. A fixed pause is not
enough: 64 connections paced at 30 ms still sent about 900 a second, which halved what the
toy model of tests/serving admitted and made its batch times erratic, so the pause grows with
the number of requests being shed at once, to keep the 503s under MAX_SHED_PER_S a second
however many connections send again.

A plain ASGI wrapper (not Starlette's BaseHTTPMiddleware, which runs each request in an extra
task and costs measurably per request).
"""

from __future__ import annotations

import asyncio
import hmac
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from fastapi.responses import JSONResponse

from .metrics import Metrics

Message = MutableMapping[str, Any]  # an ASGI message, as Starlette types it
ASGIApp = Callable[
    [MutableMapping[str, Any], Callable[[], Awaitable[Message]], Callable[[Message], Awaitable[None]]], Awaitable[None]
]
OPEN_PATHS = ("/health",)  # answered without the bearer token
SHED_PATHS = ("/", "/translate", "/attention")  # POSTs to these are shed when the server is at its bound
TRANSLATE_PATHS = ("/", "/translate")  # those a translation memory may answer without the model
SHED_PACE_S = 0.03  # a shed request's answer waits at least this long (without the GIL): see above
MAX_SHED_PER_S = 200  # 503s of the bound a second, at most: the pause grows to keep them under it
RECEIVED = "tfm.received"  # the scope's key for time.monotonic() when the guard got the request
Busy = Callable[[str], "tuple[str, int] | None"]  # a path -> the message and Retry-After of its 503


def authorized(headers: list[tuple[bytes, bytes]], token: str) -> bool:
    given = dict(headers).get(b"authorization", b"")
    scheme, _, value = given.partition(b" ")
    return scheme.lower() == b"bearer" and hmac.compare_digest(value.strip(), token.encode())


class ShedPace:
    """The pause before a shed request's 503: SHED_PACE_S, or, while many are shed at once, as
    long as answering them all at MAX_SHED_PER_S a second takes."""

    def __init__(self) -> None:
        self.pausing = 0  # shed requests waiting for their 503 now

    async def pause(self) -> None:
        self.pausing += 1
        try:
            await asyncio.sleep(max(SHED_PACE_S, self.pausing / MAX_SHED_PER_S))
        finally:
            self.pausing -= 1


class Guard:
    def __init__(
        self,
        app: ASGIApp,
        metrics: Metrics,
        token: str | None,
        cut_off: Callable[[], None],
        busy: Busy | None = None,
        pace: ShedPace | None = None,
        shed_paths: tuple[str, ...] = SHED_PATHS,
    ):
        """`busy`: None when a translation or attention request may be admitted now; else why
        not (a POST to one of `shed_paths` is answered 503 here, counted by `busy`, after
        `pace`; one to another path of SHED_PATHS is shed by the batcher, after the app has
        answered what it can without the model: a translation memory's lines)."""
        self.app, self.metrics, self.token, self.cut_off, self.busy = app, metrics, token, cut_off, busy
        self.pace, self.shed_paths = pace or ShedPace(), shed_paths

    async def __call__(
        self,
        scope: dict[str, Any],
        receive: Callable[[], Awaitable[Message]],
        send: Callable[[Message], Awaitable[None]],
    ) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        started = time.perf_counter()
        scope[RECEIVED] = time.monotonic()  # what the bound on a translation's wait counts from
        status: int | None = None  # until the answer begins

        async def send_noting_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        path = scope["path"]
        try:
            if self.token and path not in OPEN_PATHS and not authorized(scope["headers"], self.token):
                refused = JSONResponse(
                    {"error": "missing or wrong bearer token"}, status_code=401, headers={"WWW-Authenticate": "Bearer"}
                )
                return await refused(scope, receive, send_noting_status)
            if (
                self.busy is not None
                and scope["method"] == "POST"
                and path in self.shed_paths
                and (why := self.busy(path)) is not None
            ):
                return await _shed(why, self.pace, scope, receive, send_noting_status)
            self.metrics.in_flight.inc()
            try:
                await self.app(scope, receive, send_noting_status)
            except asyncio.CancelledError:
                if status is not None:  # already answering: let uvicorn drop the connection
                    raise
                # uvicorn cancels a request only when serve.shutdown_grace_s has run out: answer
                # it, rather than let uvicorn log a traceback and send a bare 500.
                self.cut_off()
                stopping = JSONResponse(
                    {"error": "the server is stopping and this request did not finish within serve.shutdown_grace_s"},
                    status_code=503,
                    headers={"Connection": "close"},
                )
                await stopping(scope, receive, send_noting_status)
            finally:
                self.metrics.in_flight.dec()
        finally:
            self.metrics.answered(path, status or 500, time.perf_counter() - started)


async def _shed(
    why: tuple[str, int],
    pace: ShedPace,
    scope: dict[str, Any],
    receive: Callable[[], Awaitable[Message]],
    send: Callable[[Message], Awaitable[None]],
) -> None:
    """503 with Retry-After after `pace`; the request's body is read and dropped, so the
    connection stays usable."""
    message = await receive()
    while message["type"] == "http.request" and message.get("more_body"):
        message = await receive()
    await pace.pause()
    text, retry_after_s = why
    busy = JSONResponse({"error": text}, status_code=503, headers={"Retry-After": str(retry_after_s)})
    await busy(scope, receive, send)
