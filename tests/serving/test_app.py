"""serving/app.py: the routes, in this process (Starlette's TestClient drives the app, its
lifespan starts the batcher and the reloader): /translate and / answer what the Python API
translates and name the model, /attention its weights, /health and /metrics what is served,
and every other answer is {"error": one line}. (Over real HTTP, `tfm serve`: test_serve_*.py.)"""

from __future__ import annotations

import pytest
import torch
from fastapi.testclient import TestClient
from helpers import untrained_checkpoint

import transformer_cli as tfm
from transformer_cli.config import ServeConfig
from transformer_cli.serving.app import create_app
from transformer_cli.serving.server import build_server

LINES = ["Ein Mann sieht einen Ball.", "Zwei Hunde."]


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return tfm.load(untrained_checkpoint(tmp_path_factory.mktemp("app") / "m.pt"), device="cpu")


@pytest.fixture(scope="module")
def client(model):
    server = build_server(
        model, ServeConfig(max_inputs=4, max_beam_size=3), "cpu", "fp32", torch.get_num_threads(), None
    )
    with TestClient(create_app(server)) as client:
        yield client


def test_translations_are_the_apis_and_name_the_model(client, model):
    for path in ("/translate", "/"):
        r = client.post(path, json={"inputs": LINES, "parameters": {"beam_size": 2}})
        assert r.status_code == 200 and r.headers["x-model-sha256"] == model.sha256
        assert r.json() == [{"translation_text": t} for t in model.translate(LINES, beam_size=2)]
    one = client.post("/translate", json={"inputs": LINES[0], "parameters": {"beam_size": 3, "n_best": 2}}).json()
    [item] = one
    assert [a["translation_text"] for a in item["alternatives"]] == model.translate(LINES[:1], 3, 2)[0]
    assert item["translation_text"] == item["alternatives"][0]["translation_text"]
    long = client.post("/translate", json={"inputs": " ".join(["Ein Mann."] * 40)}).json()
    assert long[0]["warning"].endswith(f"truncated to {model.max_src_len} (the model's limit)")


def test_attention_is_the_translations_weights_over_its_source(client, model):
    r = client.post("/attention", json={"inputs": LINES[0]})
    assert r.status_code == 200 and r.headers["x-model-sha256"] == model.sha256
    data = r.json()
    expected = model.attention(LINES[0])
    assert data["translation_text"] == expected.translation
    assert (data["source_tokens"], data["target_tokens"]) == (expected.source_tokens, expected.target_tokens)
    assert len(data["weights"]) == len(data["target_tokens"])
    assert all(abs(sum(row) - 1) < 1e-4 for row in data["weights"])


def test_health_metrics_and_the_page(client, model):
    health = client.get("/health").json()
    assert health["status"] == "ok" and health["model"] == {**model.info(), "file": "present"}
    assert health["defaults"] == {"beam_size": model.backend.decode.beam_size, "max_beam_size": 3}
    metrics = client.get("/metrics")
    assert metrics.headers["content-type"].startswith("text/plain") and b"tfm_requests_total" in metrics.content
    page = client.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")


@pytest.mark.parametrize(
    "method, path, body, status, error",
    [
        ("GET", "/nope", None, 404, "Not Found: GET /nope"),
        ("GET", "/translate", None, 405, "Method Not Allowed: GET /translate"),
        ("POST", "/translate", {"inputs": LINES * 3}, 413, "6 inputs"),
        ("POST", "/translate", {"inputs": "x", "parameters": {"beam_size": 4}}, 422, "serve.max_beam_size"),
        ("POST", "/attention", {"inputs": LINES}, 422, "one non-empty sentence"),
    ],
)
def test_every_other_answer_is_one_line_of_error(client, method, path, body, status, error):
    r = client.request(method, path, json=body)
    assert r.status_code == status and set(r.json()) == {"error"}, r.text
    assert error in r.json()["error"] and "\n" not in r.json()["error"]


def test_at_the_bound_the_memory_still_answers_its_sources_and_the_rest_is_shed(model, tmp_path):
    """With corrections.memory, /translate passes the guard when the server is at its bound: a
    source an accepted correction remembers is answered (200, from memory); a line that needs
    the model is shed by the batcher (503 with Retry-After), as the guard would have shed it."""
    from transformer_cli.config import CorrectionsConfig
    from transformer_cli.corrections.store import Correction, CorrectionStore

    cfg = CorrectionsConfig(store=str(tmp_path / "store"))
    (remembered,) = CorrectionStore(cfg.store).add([Correction(LINES[0], "A man sees a ball.", origin="test")])
    server = build_server(model, ServeConfig(), "cpu", "fp32", 1, None, corrections=cfg)
    server.batcher.busy = lambda path="/translate": ("the server is at its bound", 3)  # load, without the load
    with TestClient(create_app(server)) as client:
        r = client.post("/translate", json={"inputs": [f" {LINES[0]}"]})
        assert r.status_code == 200, r.text
        assert r.json() == [
            {"translation_text": "A man sees a ball.", "from_memory": True, "correction": remembered.id}
        ]
        shed = client.post("/translate", json={"inputs": [LINES[1]]})
        assert (shed.status_code, shed.headers["retry-after"]) == (503, "3")
        assert client.post("/attention", json={"inputs": LINES[0]}).status_code == 503  # the guard's, as before


def test_translations_use_the_servers_glossary_and_say_what_became_of_each_term(trained, tmp_path):
    glossary = tmp_path / "terms.tsv"
    glossary.write_text("Ball\tflower\nHut\tΣφαίρα\n", encoding="utf-8")
    model = tfm.load(trained["run"] / "best.pt", device="cpu")
    server = build_server(
        model, ServeConfig(), "cpu", "fp32", torch.get_num_threads(), None, glossary=(str(glossary), None)
    )
    lines = ["Ein mann sieht einen ball.", "Eine frau trägt einen hut.", "Ein kind malt eine blume."]
    with TestClient(create_app(server)) as client:
        items = client.post("/translate", json={"inputs": lines, "parameters": {"beam_size": 2}}).json()
    assert "flower" in items[0]["translation_text"].lower()
    assert items[0]["terms"] == [{"source": "Ball", "target": "flower", "used": "placed"}]
    [hut] = items[1]["terms"]
    assert hut["used"] == "unplaced" and hut["why"].startswith("the model cannot write it")
    assert "terms" not in items[2] and items[2]["translation_text"] == model.translate(lines[2:], beam_size=2)[0]
