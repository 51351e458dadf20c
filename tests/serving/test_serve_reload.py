"""Hot reload under load, damaged model files, and SIGTERM draining, on the real server."""

from __future__ import annotations

import asyncio
import shutil
import signal
import time

import httpx
import pytest
from reliability.cron_helpers import wait_until
from serving.serve_helpers import SENTENCES, Load, republish, toy_model_args

from transformer_cli.fsutil import atomic_write_bytes


@pytest.fixture
def watched(trained, tmp_path, start_server):
    """A server on its own copy of the toy model, checking the file every 50 ms."""
    published = tmp_path / "published.pt"
    shutil.copy(trained["run"] / "published.pt", published)
    server = start_server(
        "-c",
        str(trained["config"]),
        "--checkpoint",
        str(published),
        "--set",
        "serve.threads=1",
        "--set",
        "serve.reload_poll_s=0.05",
    )
    return server, published


def test_hot_reload_under_load_fails_no_request(watched, trained, model):
    """No request fails because of a reload: no answer but 200 and admission control's 503
    (serve.max_pending_s at its default: on busy cores the server sheds some of the 8 clients'
    requests, a documented answer asking them to retry, counted apart), no connection error, and
    every admitted request answered with its translation, by the old model or the new."""
    server, published = watched
    expected = dict(zip(SENTENCES, model.translate(SENTENCES)))
    source = trained["run"] / "published.pt"

    def more_replies(load: Load, n: int = 16) -> None:
        target = len(load.answered()) + n
        wait_until(lambda: len(load.answered()) >= target, 30, "answers", alive=server.tfm)

    with Load(server.url, clients=8) as load:
        second = republish(source, published, "second")  # an atomic replace, as a promotion does
        wait_until(lambda: server.sha256() == second, 30, "the new model", alive=server.tfm)
        more_replies(load)
        failed = server.metric("tfm_model_reloads_total", result="failed")
        good = published.read_bytes()
        for n, damaged in enumerate((good[: len(good) // 2], b"not a checkpoint"), start=1):
            atomic_write_bytes(published, damaged)
            wait_until(
                lambda target=failed + n: server.metric("tfm_model_reloads_total", result="failed") == target,
                30,
                "the failed reload",
                alive=server.tfm,
            )
            more_replies(load)
        assert server.sha256() == second
        third = republish(source, published, "third")  # the next good file is picked up
        wait_until(lambda: server.sha256() == third, 30, "the third model", alive=server.tfm)
        more_replies(load)
    shed = load.shed()
    print(f"{len(load.answered())} requests answered, {len(shed)} shed by admission control (503, Retry-After)")
    assert not load.failures(), (load.failures()[:3], f"{len(shed)} shed besides")
    assert all(r.text == expected[r.sentence] for r in load.answered())
    assert server.metric("tfm_requests_shed_total") == len(shed)  # each 503 seen was one admission control counted
    assert load.shas() == {model.sha256, second, third}
    assert server.metric("tfm_model_reloads_total", result="ok") == 2
    assert server.tfm.stderr.count("failed, still serving") == 2
    assert server.stop() == 0, server.tfm.stderr


def test_sigterm_answers_requests_in_flight_then_exits_0(trained, model, start_server):
    # serve.max_pending_s=null: all four admitted, this is about draining
    server = start_server(*toy_model_args(trained, "serve.max_pending_s=null"))
    long = " ".join(["ein mann sieht einen ball"] * 20)  # truncated to the model's 63 tokens
    heavy = {"inputs": [long] * 8, "parameters": {"beam_size": 6, "max_output_len": 64}}  # ~0.1-1 s each

    async def scenario() -> tuple[list[httpx.Response], BaseException | None]:
        async with httpx.AsyncClient(base_url=server.url, timeout=60) as client:
            sent = [asyncio.create_task(client.post("/translate", json=heavy)) for _ in range(4)]
            deadline = time.monotonic() + 30
            while True:  # all four received (+1: the /metrics request asking)
                text = (await client.get("/metrics")).text
                if f"tfm_requests_in_flight {len(sent) + 1:.1f}" in text:
                    break
                assert time.monotonic() < deadline and not any(t.done() for t in sent), (
                    "the requests were never all in flight at once"
                )
                await asyncio.sleep(0.005)
            server.tfm.kill(signal.SIGTERM)
            await asyncio.sleep(0.1)
            try:
                await httpx.AsyncClient(timeout=5).post(server.url + "/translate", json={"inputs": "x"})
                refused = None
            except httpx.TransportError as e:
                refused = e
            return await asyncio.gather(*sent), refused

    replies, refused = asyncio.run(scenario())
    expected = model.translate([long], beam_size=6, max_output_len=64)[0]
    assert [r.status_code for r in replies] == [200] * 4
    assert all(x["translation_text"] == expected for r in replies for x in r.json())
    assert isinstance(refused, httpx.ConnectError), "a new connection was accepted while draining"
    assert server.tfm.wait(30) == 0, server.tfm.stderr
    assert "SIGTERM: stopped after answering the requests in flight" in server.tfm.stderr
