"""`tfm serve` under load and spoken to by real clients: admission control (503 with
Retry-After at once, nothing lost or answered twice), Hugging Face's request shape through
`huggingface_hub.InferenceClient` itself."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from serve_helpers import SENTENCES


def test_hugging_face_inference_client_speaks_to_it(served, model):
    hub = pytest.importorskip("huggingface_hub")
    expected = model.translate([SENTENCES[0]], beam_size=5)[0]
    client = hub.InferenceClient(model=served.url)
    assert client.translation(SENTENCES[0]).translation_text == model.translate([SENTENCES[0]])[0]
    out = client.translation(SENTENCES[0], src_lang="de", tgt_lang="en",
                             generate_parameters={"num_beams": 5, "max_new_tokens": 40,
                                                  "early_stopping": True, "do_sample": False})
    assert out.translation_text == expected
    at_root = hub.InferenceClient(base_url=served.url)  # posts to /
    assert at_root.translation(SENTENCES[0], generate_parameters={"num_beams": 5}).translation_text == expected
    with pytest.raises(hub.errors.HfHubHTTPError) as e:
        client.translation(SENTENCES[0], generate_parameters={"do_sample": True, "top_k": 5, "num_beams": 2})
    assert e.value.response.status_code == 400
    assert e.value.response.json() == {"error": "not supported by tfm: generate_parameters.do_sample=true, "
                                                "generate_parameters.top_k=5"}


@pytest.mark.parametrize("parameters, status, message", [
    ({"src_lang": "fr", "tgt_lang": "en"}, 400, "this model translates de to en, not fr to en"),
    ({"truncation": "do_not_truncate"}, 400, "not supported by tfm: truncation=\"do_not_truncate\""),
    ({"beam_size": 2, "generate_parameters": {"num_beams": 3}}, 422, "beam_size given twice"),
    ({"generate_parameters": {"max_length": 1}}, 422, "generate_parameters.max_length must be an integer >= 2"),
    ({"generate_parameters": {"num_beams": 99}}, 422, "parameters.beam_size must be an integer from 1 to 6"),
])
def test_what_tfm_cannot_do_is_a_one_line_4xx(served, parameters, status, message):
    r = served.post("/translate", json={"inputs": SENTENCES[0], "parameters": parameters})
    assert r.status_code == status and message in r.json()["error"], r.text


def test_max_length_counts_the_start_token(served, model):
    r = served.post("/", json={"inputs": SENTENCES[1], "parameters": {"generate_parameters": {"max_length": 4}}})
    assert r.json() == [{"translation_text": model.translate([SENTENCES[1]], max_output_len=3)[0]}]


def test_past_the_bound_requests_are_answered_503_at_once_and_none_is_lost(start_server, trained):
    # The bound: one batch of 60 tokens before the first batch is measured, then a millisecond
    # of decoding at the measured rate. A request of ~110 tokens fits neither: one at a time.
    server = start_server("-c", str(trained["config"]), "--checkpoint", str(trained["run"] / "published.pt"),
                          "--set", "serve.threads=1", "--set", "serve.max_pending_s=0.001",
                          "--set", "serve.batch_tokens=60", "--set", "serve.max_wait_ms=0")
    body = {"inputs": SENTENCES * 2, "parameters": {"beam_size": 6}}

    async def burst() -> list[httpx.Response]:
        async with httpx.AsyncClient(base_url=server.url, timeout=60) as client:
            return await asyncio.gather(*(client.post("/translate", json=body) for _ in range(24)))

    codes: list[int] = []
    for _ in ("before any batch", "at the measured rate"):
        answers = asyncio.run(burst())
        codes += [r.status_code for r in answers]
        assert {r.status_code for r in answers} == {200, 503}, codes
        for r in answers:
            if r.status_code == 503:
                assert int(r.headers["Retry-After"]) >= 1
                assert "serve.max_pending_s=0.001" in r.json()["error"]
                assert r.elapsed.total_seconds() < 5  # at once, not after waiting its turn
            else:
                assert len(r.json()) == len(body["inputs"])
    assert server.metric("tfm_requests_shed_total") == codes.count(503)
    assert server.metric("tfm_sentences_total") == codes.count(200) * len(body["inputs"])  # none twice
