"""Issue 19 on the real server: hostile bodies, slow clients, SIGTERM with a slow client in
flight, a bad listening address, a blank token variable, {"error"} on 404/405, and the served
file disappearing."""

from __future__ import annotations

import shutil
import signal
import time

import pytest
from reliability.cron_helpers import wait_until
from serving.serve_helpers import Served, SlowClient, toy_model_args


@pytest.fixture(scope="module")
def roomy(trained, tmp_path_factory):
    """A server with the default body limit (64 KiB), a 1 s body timeout, on its own copy of
    the toy model, checked every 50 ms."""
    work = tmp_path_factory.mktemp("roomy")
    published = work / "published.pt"
    shutil.copy(trained["run"] / "published.pt", published)
    server = Served(
        "-c",
        str(trained["config"]),
        "--checkpoint",
        str(published),
        "--set",
        "serve.threads=1",
        "--set",
        "serve.body_timeout_s=1",
        "--set",
        "serve.reload_poll_s=0.05",
        log_to=work / "serve.log",
    )
    yield server, published
    assert server.stop() == 0, server.tfm.stderr


def nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


HOSTILE = {  # bodies that made json.loads raise something else than a decode error: 500
    "nesting": (b'{"inputs":' + nested(5000) + b"}", "invalid JSON: nested too deeply"),
    "long-integer": (
        b'{"inputs": "x", "parameters": {"beam_size": ' + b"9" * 5001 + b"}}",
        "invalid JSON: a number with too many digits",
    ),
}


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_json_is_a_one_line_400(roomy, name):
    server, _ = roomy
    body, error = HOSTILE[name]
    r = server.post("/translate", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json() == {"error": error}, r.text
    assert "Traceback" not in server.tfm.stderr and 'code="5' not in server.get("/metrics").text


def test_nested_values_in_error_messages_are_no_500(roomy):
    """Just shallow enough to decode, a nested value once went deeper still when the error
    message printed it back (RecursionError: 500)."""
    server, _ = roomy
    for depth in range(850, 1000, 5):
        for body in (
            b'{"inputs": "x", "parameters": ' + nested(depth) + b"}",
            b'{"inputs": "x", "parameters": {"length_penalty": ' + nested(depth) + b"}}",
        ):
            r = server.post("/translate", content=body)
            assert r.status_code in (400, 422) and "\n" not in r.json()["error"], (depth, r.text)
    assert "Traceback" not in server.tfm.stderr


def test_unknown_path_and_wrong_method_answer_error_json(roomy):
    server, _ = roomy
    missing, wrong = server.get("/nothing/here"), server.get("/translate")
    assert missing.status_code == 404 and missing.json() == {"error": "Not Found: GET /nothing/here"}
    assert wrong.status_code == 405 and wrong.json() == {"error": "Method Not Allowed: GET /translate"}
    assert wrong.headers["allow"] == "POST"


def test_the_address_served_is_logged(roomy):
    """uvicorn gets sockets tfm bound itself, so tfm names the address."""
    server, _ = roomy
    assert f"listening on http://127.0.0.1:{server.port}" in server.tfm.stderr


def test_a_body_trickling_in_is_answered_408(roomy):
    server, _ = roomy
    started = time.monotonic()
    with SlowClient(server.port, content_length=200, every_s=0.2) as client:
        status, body = client.answer(timeout=15)
        took = time.monotonic() - started
        closed = client.closed_by_server()
    assert status == 408 and "serve.body_timeout_s" in body and took < 10, (took, body)
    assert closed, "the connection stayed open after the 408"
    r = server.post("/translate", json={"inputs": "Ein kind hält einen hut."})
    assert r.status_code == 200 and r.json()[0]["translation_text"] == "A child holds a hat."


def test_a_vanished_model_file_is_logged_once_and_shown_in_health(roomy):
    server, published = roomy
    assert server.get("/health").json()["model"]["file"] == "present"
    kept = published.with_suffix(".kept")
    published.rename(kept)
    wait_until(
        lambda: server.get("/health").json()["model"]["file"] == "missing",
        10,
        "/health to show the file missing",
        alive=server.tfm,
    )
    time.sleep(0.3)  # several polls
    health = server.get("/health")
    assert health.status_code == 200 and health.json()["status"] == "ok"
    r = server.post("/translate", json={"inputs": "Ein mann sieht einen ball."})
    assert r.status_code == 200 and r.json()[0]["translation_text"] == "A man sees a ball."
    kept.rename(published)
    wait_until(
        lambda: server.get("/health").json()["model"]["file"] == "present",
        10,
        "/health to show the file back",
        alive=server.tfm,
    )
    time.sleep(0.3)
    log = server.tfm.stderr
    assert log.count(f"warning: {published} is gone") == 1, log
    assert log.count(f"{published} is back") == 1, log


def test_sigterm_with_a_slow_client_exits_within_the_grace_period(trained, start_server):
    server = start_server(*toy_model_args(trained, "serve.shutdown_grace_s=1", "serve.body_timeout_s=600"))
    with SlowClient(server.port, content_length=200, every_s=0.5) as client:
        # the slow request and the /metrics request asking
        wait_until(lambda: server.metric("tfm_requests_in_flight") == 2, 10, "the slow request", alive=server.tfm)
        stopped = time.monotonic()
        server.tfm.kill(signal.SIGTERM)
        code = server.tfm.wait(20)
        took = time.monotonic() - stopped
        status, body = client.answer(timeout=5)
    assert code == 0 and took < 1 + 8, (code, took, server.tfm.stderr)  # without a grace: ~100 s
    assert status == 503 and "serve.shutdown_grace_s" in body, body
    log = server.tfm.stderr
    assert "SIGTERM: stopped; serve.shutdown_grace_s (1 s) ran out: 1 request(s) cut off" in log, log
    assert "Traceback" not in log
