"""serving/corrections.py: POST /corrections on the real `tfm serve` with a real HTTP client:
behind the token, bounded, limited per client, acknowledged once durable (a SIGKILL after the
200 loses nothing), and answered from memory at once by every server of the store."""

from __future__ import annotations

import json
import signal

from serving.serve_helpers import SENTENCES, Served, toy_model_args

from transformer_cli.corrections.store import CorrectionStore
from transformer_cli.serving.corrections import PerMinute
from transformer_cli.serving.requests import ClientError

TOKEN = "s3cret-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def _args(trained, tmp_path, *settings):
    token = tmp_path / "token"
    token.write_text(TOKEN)
    store = tmp_path / "store"
    return toy_model_args(
        trained, f"serve.token_file={token}", f"corrections.store={store}", "serve.max_pending_s=null", *settings
    ), store


def test_a_correction_is_durable_at_its_200_and_served_from_memory_by_every_server(trained, tmp_path):
    args, store = _args(trained, tmp_path, "corrections.per_minute=3")
    one = Served(*args, log_to=tmp_path / "one.log")
    two = Served(*args, log_to=tmp_path / "two.log")
    try:
        source = SENTENCES[0]
        before = one.post("/translate", json={"inputs": [source, SENTENCES[1]]}, headers=AUTH).json()
        assert "from_memory" not in before[0]
        fix = {"source": source, "corrected": "A man looks at a ball.", "output": before[0]["translation_text"]}
        r = one.post("/corrections", json={**fix, "client": "editor-1"}, headers=AUTH)
        assert r.status_code == 200, r.text
        answer = r.json()
        assert answer["status"] == "accepted" and answer["reasons"] == []
        one.tfm.proc.send_signal(signal.SIGKILL)  # right after the 200: nothing may be lost
        one.tfm.wait(30)
        (stored,) = CorrectionStore(store).corrections()
        assert (stored.id, stored.corrected, stored.client, stored.origin) == (
            answer["id"],
            fix["corrected"],
            "editor-1",
            "serve",
        )
        # the other server answers it from memory at its next request, the other line from the model
        after = two.post("/translate", json={"inputs": [f"  {source} ", SENTENCES[1]]}, headers=AUTH).json()
        assert after[0] == {"translation_text": fix["corrected"], "from_memory": True, "correction": answer["id"]}
        assert after[1] == before[1]
        # refusals: no token, too big, too many from one client, not a correction; nothing stored
        assert two.post("/corrections", json=fix).status_code == 401
        big = two.post("/corrections", content=json.dumps({**fix, "corrected": "x" * 20_000}), headers=AUTH)
        assert big.status_code == 413 and big.json() == {
            "error": "request body larger than 16384 bytes (corrections.max_bytes)"
        }
        bad = two.post("/corrections", json={"source": source}, headers=AUTH)
        assert bad.status_code == 422 and bad.json() == {"error": "corrected: a non-empty string is required"}
        codes = [
            two.post("/corrections", json={**fix, "corrected": f"A man sees ball {i}.", "client": "c9"}, headers=AUTH)
            for i in range(4)
        ]
        assert [r.status_code for r in codes] == [200, 200, 200, 429] and "Retry-After" in codes[3].headers
        assert len(CorrectionStore(store).corrections()) == 1 + 3
    finally:
        two.stop()
        one.stop()


def test_a_correction_that_fails_the_guards_is_held_not_served(trained, tmp_path):
    args, store = _args(trained, tmp_path)
    server = Served(*args, log_to=tmp_path / "serve.log")
    try:
        source = SENTENCES[2]
        r = server.post(
            "/corrections",
            json={"source": source, "corrected": source, "output": "A child holds a hat."},
            headers=AUTH,
        )
        assert r.status_code == 200 and r.json()["status"] == "held"
        assert r.json()["reasons"] == ["the correction is the source itself"]
        answer = server.post("/translate", json={"inputs": source}, headers=AUTH).json()
        assert "from_memory" not in answer[0]
    finally:
        assert server.stop() == 0


def test_corrections_need_a_token(trained, tmp_path):
    import os

    from helpers import run_tfm

    args = toy_model_args(trained, f"corrections.store={tmp_path / 'store'}")
    env = {k: v for k, v in os.environ.items() if k != "TFM_SERVE_TOKEN"}
    r = run_tfm("serve", *args, "--port", "0", env=env, timeout=60)
    assert r.returncode == 2 and r.stderr.strip() == (
        "tfm: error: corrections.store: tfm serve takes corrections only behind a bearer token: set "
        "$TFM_SERVE_TOKEN or serve.token_file"
    )


def test_a_client_past_its_minute_is_told_when_to_come_back(monkeypatch):
    import pytest

    from transformer_cli.serving import corrections

    now = [1000.0]
    monkeypatch.setattr(corrections.time, "monotonic", lambda: now[0])
    limit = PerMinute(2)
    limit.admit("a")
    now[0] += 20
    limit.admit("a")
    limit.admit("b")  # each client its own minute
    with pytest.raises(ClientError) as refused:
        limit.admit("a")
    assert refused.value.status == 429 and refused.value.headers == {"Retry-After": "41"}
    now[0] += 40.5  # the first left the window
    limit.admit("a")
