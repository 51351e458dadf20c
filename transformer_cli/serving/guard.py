"""ASGI middleware around every request: the bearer-token check, the per-request metrics, and
the 503 of a request that uvicorn cancels when serve.shutdown_grace_s runs out.

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
ASGIApp = Callable[[MutableMapping[str, Any], Callable[[], Awaitable[Message]], Callable[[Message], Awaitable[None]]],
                   Awaitable[None]]
OPEN_PATHS = ("/health",)  # answered without the bearer token


def authorized(headers: list[tuple[bytes, bytes]], token: str) -> bool:
    given = dict(headers).get(b"authorization", b"")
    scheme, _, value = given.partition(b" ")
    return scheme.lower() == b"bearer" and hmac.compare_digest(value.strip(), token.encode())


class Guard:
    def __init__(self, app: ASGIApp, metrics: Metrics, token: str | None,
                 cut_off: Callable[[], None]):
        self.app, self.metrics, self.token, self.cut_off = app, metrics, token, cut_off

    async def __call__(self, scope: dict[str, Any], receive: Callable[[], Awaitable[Message]],
                       send: Callable[[Message], Awaitable[None]]) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        started = time.perf_counter()
        status: int | None = None  # until the answer begins

        async def send_noting_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        path = scope["path"]
        try:
            if self.token and path not in OPEN_PATHS and not authorized(scope["headers"], self.token):
                refused = JSONResponse({"error": "missing or wrong bearer token"}, status_code=401,
                                       headers={"WWW-Authenticate": "Bearer"})
                return await refused(scope, receive, send_noting_status)
            self.metrics.in_flight.inc()
            try:
                await self.app(scope, receive, send_noting_status)
            except asyncio.CancelledError:
                if status is not None:  # already answering: let uvicorn drop the connection
                    raise
                # uvicorn cancels a request only when serve.shutdown_grace_s has run out: answer
                # it, rather than let uvicorn log a traceback and send a bare 500.
                self.cut_off()
                stopping = JSONResponse({"error": "the server is stopping and this request did not "
                                         "finish within serve.shutdown_grace_s"}, status_code=503,
                                        headers={"Connection": "close"})
                await stopping(scope, receive, send_noting_status)
            finally:
                self.metrics.in_flight.dec()
        finally:
            self.metrics.answered(path, status or 500, time.perf_counter() - started)
