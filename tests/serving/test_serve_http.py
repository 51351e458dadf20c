"""`tfm serve` answering real HTTP requests: translations, bad input, auth, page, metrics."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
from serving.serve_helpers import SENTENCES, toy_model_args


def test_translate_one_and_many(served, model):
    r = served.post("/translate", json={"inputs": "Ein mann sieht einen ball."})
    assert r.status_code == 200 and r.json() == [{"translation_text": "A man sees a ball."}]
    assert r.headers["x-model-sha256"] == model.sha256
    r = served.post("/translate", json={"inputs": SENTENCES + [""]})
    assert [x["translation_text"] for x in r.json()] == model.translate(SENTENCES) + [""]
    r = served.post(
        "/translate",
        json={
            "inputs": ["Ein mann sieht einen ball.", "Eine frau malt."],
            "parameters": {"beam_size": 4, "n_best": 2, "max_output_len": 20},
        },
    )
    first, second = r.json()
    assert first["translation_text"] == "A man sees a ball." and len(first["alternatives"]) == 2
    scores = [a["score"] for a in first["alternatives"]]
    assert scores == sorted(scores, reverse=True)
    assert [a["translation_text"] for a in second["alternatives"]] == model.translate(
        ["Eine frau malt."], beam_size=4, n_best=2
    )[0]


def test_long_input_is_truncated_with_a_warning(served, model):
    r = served.post("/translate", json={"inputs": ["Ein mann.", " ".join(["ein mann sieht einen ball"] * 60)]})
    assert r.status_code == 200
    short, long = r.json()
    assert "warning" not in short
    assert long["warning"].endswith(f"truncated to {model.max_src_len} (the model's limit)")


def test_concurrent_requests_answered_correctly_and_in_order(served, model):
    requests = [SENTENCES[i % 6 : i % 6 + 1 + i % 3] for i in range(48)]
    batches_before = served.metric("tfm_batch_sentences_count")

    async def send_all() -> list[httpx.Response]:
        async with httpx.AsyncClient(base_url=served.url, timeout=60) as client:
            return await asyncio.gather(*(client.post("/translate", json={"inputs": lines}) for lines in requests))

    replies = asyncio.run(send_all())
    expected = dict(zip(SENTENCES, model.translate(SENTENCES)))
    for lines, r in zip(requests, replies):
        assert r.status_code == 200
        assert [x["translation_text"] for x in r.json()] == [expected[line] for line in lines]
    batches = served.metric("tfm_batch_sentences_count") - batches_before
    assert batches < len(requests), "concurrent requests were not batched together"


BAD_INPUTS = [  # (body as bytes, status, words the error must contain)
    (b'{"inputs": "Ein mann."', 400, "invalid JSON"),
    (b"", 400, "empty body"),
    (b'{"inputs": "\xff\xfe"}', 400, "not valid UTF-8"),
    (b'["Ein mann."]', 422, '"inputs"'),
    (b'{"text": "Ein mann."}', 422, '"inputs"'),
    (b'{"inputs": 5}', 422, "string or a list of strings"),
    (b'{"inputs": ["Ein mann.", 7]}', 422, "string or a list of strings"),
    (b'{"inputs": {"a": 1}}', 422, "string or a list of strings"),
    (b'{"inputs": null}', 422, "string or a list of strings"),
    (b'{"inputs": []}', 422, "empty list"),
    (b'{"inputs": "x", "options": {}}', 422, "unknown field(s): options"),
    (b'{"inputs": "x", "parameters": {"beam": 2, "temperature": 1}}', 422, "unknown parameter(s): beam, temperature"),
    (b'{"inputs": "x", "parameters": [1]}', 422, '"parameters" must be an object'),
    (b'{"inputs": "x", "parameters": {"beam_size": 0}}', 422, "beam_size must be an integer from 1 to 6"),
    (b'{"inputs": "x", "parameters": {"beam_size": 7}}', 422, "beam_size must be an integer from 1 to 6"),
    (b'{"inputs": "x", "parameters": {"beam_size": "5"}}', 422, "beam_size must be an integer"),
    (b'{"inputs": "x", "parameters": {"beam_size": 2.5}}', 422, "beam_size must be an integer"),
    (b'{"inputs": "x", "parameters": {"beam_size": true}}', 422, "beam_size must be an integer"),
    (b'{"inputs": "x", "parameters": {"n_best": 9}}', 422, "n_best must be an integer from 1 to 6"),
    (b'{"inputs": "x", "parameters": {"max_output_len": 0}}', 422, "max_output_len must be an integer"),
    (b'{"inputs": "x", "parameters": {"length_penalty": -1}}', 422, "length_penalty must be a number"),
    (b'{"inputs": "\\ud800 kaputt"}', 422, "unpaired surrogate"),
    (json.dumps({"inputs": ["Ein mann."] * 9}).encode(), 413, "at most 8 per request"),
    (json.dumps({"inputs": "Ein mann. " * 500}).encode(), 413, "larger than 4096 bytes"),
]


@pytest.mark.parametrize("body,status,words", BAD_INPUTS, ids=[f"{s}-{w}" for _, s, w in BAD_INPUTS])
def test_bad_input_is_a_4xx_naming_the_problem(served, body, status, words):
    r = served.post("/translate", content=body, headers={"content-type": "application/json"})
    assert r.status_code == status, r.text
    error = r.json()["error"]
    assert words in error and "\n" not in error and "Traceback" not in r.text


def test_bad_requests_leave_the_server_serving(served):
    assert served.get("/translate").status_code == 405
    assert served.get("/nothing/here").status_code == 404
    chunked = served.post("/translate", content=iter([b'{"inputs": "', b"x" * 5000, b'"}']))
    assert chunked.status_code == 413  # no Content-Length: counted while reading
    assert served.post("/attention", json={"inputs": ["a", "b"]}).status_code == 422
    assert served.post("/attention", json={"inputs": "  "}).status_code == 422
    r = served.post("/translate", json={"inputs": "Ein kind hält einen hut."})
    assert r.status_code == 200 and r.json()[0]["translation_text"] == "A child holds a hat."
    metrics = served.get("/metrics").text
    assert 'code="5' not in metrics and 'tfm_request_errors_total{code="422",path="/translate"}' in metrics


def test_health_and_metrics(served, model):
    health = served.get("/health").json()
    assert health["status"] == "ok"
    assert health["model"]["sha256"] == model.sha256 and health["model"]["config"] == "toy"
    assert set(health["model"]) == {"path", "sha256", "loaded_at", "config", "file"}
    r = served.get("/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    for name in (
        "tfm_requests_total",
        "tfm_request_errors_total",
        "tfm_sentences_total",
        "tfm_batch_sentences_bucket",
        "tfm_request_latency_seconds_bucket",
        "tfm_model_reloads_total",
        "tfm_model_info",
    ):
        assert name in r.text
    assert served.metric("tfm_sentences_total") > 0


def test_page_loads_and_its_endpoint_works(served, model):
    page = served.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert 'call("attention"' in page.text and 'call("health")' in page.text
    assert '<textarea id="text"' in page.text and 'id="beam"' in page.text
    # what the page's script sends
    r = served.post("/attention", json={"inputs": "Ein mann sieht einen ball.", "parameters": {"beam_size": 2}})
    assert r.status_code == 200
    data = r.json()
    assert data["translation_text"] == model.translate(["Ein mann sieht einen ball."], beam_size=2)[0]
    assert len(data["weights"]) == len(data["target_tokens"])
    assert all(len(row) == len(data["source_tokens"]) for row in data["weights"])
    assert all(abs(sum(row) - 1) < 1e-3 for row in data["weights"])


def test_bearer_token(trained, tmp_path, start_server):
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    server = start_server(*toy_model_args(trained, f"serve.token_file={token}"))
    assert server.get("/health").status_code == 200
    body = {"inputs": "Ein mann sieht einen ball."}
    for path in ("/", "/metrics"):
        assert server.get(path).status_code == 401
    assert server.post("/translate", json=body).status_code == 401
    wrong = server.post("/translate", json=body, headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401 and wrong.headers["www-authenticate"] == "Bearer"
    right = server.post("/translate", json=body, headers={"Authorization": "Bearer s3cret"})
    assert right.status_code == 200 and right.json()[0]["translation_text"] == "A man sees a ball."
    assert server.get("/", headers={"Authorization": "Bearer s3cret"}).status_code == 200
    assert server.stop() == 0
