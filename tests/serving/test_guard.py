"""serving/guard.py: the ASGI middleware in front of every route: the bearer token (but not
for /health), a request shed at the bound answered 503 with Retry-After before routing (its
body read, after the ShedPace pause), a request cut off by the shutdown grace answered 503,
and every answer counted by path and status. Driven as uvicorn drives it, with ASGI messages."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest

from transformer_cli.serving import guard
from transformer_cli.serving.guard import MAX_SHED_PER_S, SHED_PACE_S, Guard, ShedPace, authorized
from transformer_cli.serving.metrics import Metrics


class Inner:
    """The app behind the guard: answers 200 "routed", or waits to be cancelled."""

    def __init__(self, hang: bool = False):
        self.calls: list[str] = []
        self.hang = hang

    async def __call__(self, scope, receive, send):
        self.calls.append(scope["path"])
        if self.hang:
            await asyncio.sleep(3600)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"routed"})


def request(
    app: Any, path: str, method: str = "POST", headers: dict[str, str] | None = None, cancel_after: float | None = None
) -> tuple[int | None, dict[str, str], bytes, int]:
    """Status, headers and body of one request through `app`, and how many body messages it read."""
    scope = {
        "type": "http",
        "method": method,
        "path": path,
        "headers": [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()],
    }
    parts = [
        {"type": "http.request", "body": b'{"inputs": ', "more_body": True},
        {"type": "http.request", "body": b'"x"}'},
    ]
    sent: list[dict] = []
    read = 0

    async def receive():
        nonlocal read
        read += 1
        return parts.pop(0) if parts else {"type": "http.disconnect"}

    async def send(message):
        sent.append(message)

    async def run():
        task = asyncio.ensure_future(app(scope, receive, send))
        if cancel_after is not None:
            await asyncio.sleep(cancel_after)
            task.cancel()  # as uvicorn does when serve.shutdown_grace_s runs out
        await task

    asyncio.run(run())
    start = next((m for m in sent if m["type"] == "http.response.start"), None)
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    heads = {k.decode(): v.decode() for k, v in start["headers"]} if start else {}
    return (start["status"] if start else None), heads, body, read


def counted(metrics: Metrics, path: str, code: int) -> float:
    return metrics.registry.get_sample_value("tfm_requests_total", {"path": path, "code": str(code)}) or 0.0


def test_the_bearer_token_is_needed_everywhere_but_health():
    assert authorized([(b"authorization", b"Bearer s3cret")], "s3cret")
    assert authorized([(b"authorization", b"bearer  s3cret ")], "s3cret")
    assert not authorized([(b"authorization", b"Basic s3cret")], "s3cret")
    assert not authorized([], "s3cret") and not authorized([(b"authorization", b"Bearer nope")], "s3cret")
    inner, metrics = Inner(), Metrics()
    app = Guard(inner, metrics, "s3cret", cut_off=lambda: None)
    status, headers, body, _ = request(app, "/translate")
    assert (status, headers["www-authenticate"]) == (401, "Bearer")
    assert json.loads(body) == {"error": "missing or wrong bearer token"}
    assert request(app, "/health", "GET")[0] == 200
    assert request(app, "/translate", headers={"Authorization": "Bearer s3cret"})[:3:2] == (200, b"routed")
    assert inner.calls == ["/health", "/translate"]
    assert counted(metrics, "/translate", 401) == 1 and counted(metrics, "/translate", 200) == 1
    assert request(Guard(Inner(), Metrics(), None, cut_off=lambda: None), "/metrics", "GET")[0] == 200  # no token


def test_at_the_bound_a_translation_is_shed_before_routing_with_its_body_read():
    inner, metrics = Inner(), Metrics()
    app = Guard(inner, metrics, None, cut_off=lambda: None, busy=lambda path: ("the server is at its bound", 7))
    started = time.perf_counter()
    status, headers, body, read = request(app, "/translate")
    assert time.perf_counter() - started >= SHED_PACE_S  # paced
    assert (status, headers["retry-after"], json.loads(body)) == (503, "7", {"error": "the server is at its bound"})
    assert read == 2 and inner.calls == []  # the whole body read and dropped: the connection stays usable
    assert request(app, "/health", "GET")[0] == 200  # only translation and attention POSTs are shed
    assert request(app, "/translate", "GET")[0] == 200
    assert counted(metrics, "/translate", 503) == 1
    assert metrics.registry.get_sample_value("tfm_request_errors_total", {"path": "/translate", "code": "503"}) == 1


def test_a_request_cut_off_by_the_shutdown_grace_is_answered_503():
    cut: list[int] = []
    metrics = Metrics()
    app = Guard(Inner(hang=True), metrics, None, cut_off=lambda: cut.append(1))
    status, headers, body, _ = request(app, "/translate", cancel_after=0.05)
    assert (status, headers["connection"]) == (503, "close") and cut == [1]
    assert "did not finish within serve.shutdown_grace_s" in json.loads(body)["error"]
    assert metrics.registry.get_sample_value("tfm_requests_in_flight") == 0
    assert counted(metrics, "/translate", 503) == 1


def test_the_pause_grows_with_the_requests_shed_at_once(monkeypatch):
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    monkeypatch.setattr(guard.asyncio, "sleep", sleep)
    pace = ShedPace()

    async def shed(n: int) -> None:
        pace.pausing = n - 1  # n - 1 others already waiting
        await pace.pause()

    asyncio.run(shed(1))
    asyncio.run(shed(60))
    assert waits == [SHED_PACE_S, pytest.approx(60 / MAX_SHED_PER_S)] and pace.pausing == 59
