"""serving/corrections.py: POST /corrections on the real `tfm serve` with a real HTTP client:
behind the token, bounded, limited per client, acknowledged once durable (a SIGKILL after the
200 loses nothing), and answered from memory at once by every server of the store."""

from __future__ import annotations

import json
import signal
import time

from serving.serve_helpers import AUTH, SENTENCES, Served, corrections_args, toy_model_args

from transformer_cli.checkpoint import read_payload, write_payload
from transformer_cli.corrections.store import CorrectionStore
from transformer_cli.serving.corrections import PerMinute
from transformer_cli.serving.requests import ClientError


def test_a_correction_is_durable_at_its_200_and_served_from_memory_by_every_server(trained, tmp_path):
    args, store = corrections_args(trained, tmp_path, "corrections.per_minute=3")
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


def test_a_correction_that_fails_the_guards_is_held_not_served_and_served_sources_are_kept(trained, tmp_path):
    args, store = corrections_args(trained, tmp_path, "corrections.served_per_day=2")
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
        server.post("/translate", json={"inputs": [source, *SENTENCES[3:5]]}, headers=AUTH)
        assert (store / "served.de").read_text().splitlines() == [source, SENTENCES[3]]  # 2 a day, each once
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


def test_no_acknowledged_correction_is_lost_across_a_reload_and_a_sigkill_under_load(trained, tmp_path):
    """4 clients post corrections while 4 translate; the model is re-published (hot reload), then
    the server is SIGKILLed and started again: every correction answered 200 is in the store, and
    the new server answers each from memory."""
    import shutil
    import threading

    import httpx
    from serving.serve_helpers import republish

    from transformer_cli.corrections.store import CorrectionStore as Store

    model = tmp_path / "published.pt"
    shutil.copyfile(trained["run"] / "published.pt", model)
    limits = ("corrections.per_minute=100000", "corrections.per_client_per_day=1000000")  # one caller: 127.0.0.1
    args, store = corrections_args(trained, tmp_path, *limits, "serve.reload_poll_s=0.1")
    args[args.index("--checkpoint") + 1] = str(model)
    server = {"now": Served(*args, log_to=tmp_path / "a.log")}
    acked: list[tuple[str, str]] = []
    translated = [0]
    stop = threading.Event()

    def post(i: int) -> None:
        n = 0
        while not stop.is_set():
            source = f"Satz {i}-{n} ."
            try:
                r = httpx.post(
                    server["now"].url + "/corrections",
                    json={"source": source, "corrected": f"Sentence {i}-{n} .", "client": f"c{i}"},
                    headers=AUTH,
                    timeout=10,
                )
            except httpx.TransportError:
                continue  # the server is down: try again
            if r.status_code == 200:
                acked.append((r.json()["id"], source))
            n += 1

    def translate(i: int) -> None:
        while not stop.is_set():
            try:
                r = httpx.post(
                    server["now"].url + "/translate", json={"inputs": SENTENCES[i]}, headers=AUTH, timeout=10
                )
                translated[0] += r.status_code == 200
            except httpx.TransportError:
                continue

    threads = [threading.Thread(target=f, args=(i,)) for f in (post, translate) for i in range(4)]
    for t in threads:
        t.start()
    try:
        wait = time.monotonic() + 60
        while len(acked) < 20 and time.monotonic() < wait:
            time.sleep(0.05)
        sha = republish(model, model, "a new version")
        while server["now"].sha256() != sha and time.monotonic() < wait:
            time.sleep(0.05)
        assert server["now"].sha256() == sha  # reloaded under load
        before = len(acked)
        while len(acked) < before + 20 and time.monotonic() < wait:
            time.sleep(0.05)
        server["now"].tfm.proc.send_signal(signal.SIGKILL)
        server["now"].tfm.wait(30)
        server["now"] = Served(*args, log_to=tmp_path / "b.log")
        killed_at = len(acked)
        while len(acked) < killed_at + 20 and time.monotonic() < wait:
            time.sleep(0.05)
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    try:
        stored = {c.id: c for c in Store(store).corrections()}
        lost = [i for i, _ in acked if i not in stored]
        assert len(acked) >= 60 and lost == [] and translated[0] > 0
        answers = server["now"].post("/translate", json={"inputs": [s for _, s in acked[-8:]]}, headers=AUTH).json()
        assert all(a.get("from_memory") for a in answers)
    finally:
        server["now"].stop()


def test_the_page_is_answered_from_memory_with_the_models_attention_over_the_correction(trained, tmp_path, model):
    """POST /attention (the try-it page's) once answered a source the memory holds with the
    model's own translation, where /translate answered the correction. Now it answers the
    correction, says which (as /translate does), and its weights are the model's attention while
    it reads the correction (teacher forcing); a source the memory does not hold is the model's."""
    args, _ = corrections_args(trained, tmp_path)
    server = Served(*args, log_to=tmp_path / "serve.log")
    try:
        source, other = SENTENCES[0], SENTENCES[1]
        fix = {"source": source, "corrected": "A man looks at a red ball."}
        correction = server.post("/corrections", json=fix, headers=AUTH).json()
        assert correction["status"] == "accepted", correction
        translated = server.post("/translate", json={"inputs": source}, headers=AUTH).json()[0]
        r = server.post("/attention", json={"inputs": f" {source}"}, headers=AUTH)
        assert r.status_code == 200, r.text
        shown = r.json()
        assert {k: shown[k] for k in ("translation_text", "from_memory", "correction")} == translated
        tgt = model.backend.tokenizers.tgt
        (ids,) = tgt.encode_batch([fix["corrected"]])
        assert shown["target_tokens"] == tgt.id_to_token([*ids, tgt.ids.eos])  # the correction's, forced
        assert shown["source_tokens"] == model.attention(source).source_tokens
        assert [len(row) for row in shown["weights"]] == [len(shown["source_tokens"])] * len(shown["target_tokens"])
        assert all(abs(sum(row) - 1) < 1e-4 for row in shown["weights"])
        plain = server.post("/attention", json={"inputs": other}, headers=AUTH).json()
        expected = model.attention(other)
        assert "from_memory" not in plain and "correction" not in plain
        assert (plain["translation_text"], plain["target_tokens"]) == (expected.translation, expected.target_tokens)
    finally:
        assert server.stop() == 0


def test_a_line_close_to_a_correction_is_decoded_with_it_by_every_server_and_says_which(trained, tmp_path):
    """Near-matches: once a correction is accepted, the other server decodes a line with the
    same words (another punctuation mark: not the memory's) as the correction, a line sharing
    some of its words with its help, both saying which correction they drew on, and a line
    sharing none exactly as before."""
    args, store = corrections_args(
        trained,
        tmp_path,
        "corrections.near_matches.weight=1.0",
        "corrections.near_matches.reach=1e9",
        "corrections.near_matches.neighbours=1",
        "corrections.near_matches.doubt=0",
    )
    one = Served(*args, log_to=tmp_path / "one.log")
    two = Served(*args, log_to=tmp_path / "two.log")
    try:
        same_words, some_words, none = "Ein mann sieht einen ball !", "Ein mann sieht einen hut.", SENTENCES[1]
        before = two.post("/translate", json={"inputs": [same_words, some_words, none]}, headers=AUTH).json()
        assert not any("near_matches" in item for item in before)
        fix = {"source": SENTENCES[0], "corrected": "A tall man kicks a red ball."}
        posted = one.post("/corrections", json=fix, headers=AUTH).json()
        assert posted["status"] == "accepted"
        after = two.post("/translate", json={"inputs": [same_words, some_words, none]}, headers=AUTH).json()
        assert after[0] == {"translation_text": fix["corrected"], "near_matches": [posted["id"]]}
        assert after[1]["near_matches"] == [posted["id"]]
        assert after[2] == before[2]
        off = two.post("/translate", json={"inputs": [SENTENCES[0]]}, headers=AUTH).json()
        assert off == [{"translation_text": fix["corrected"], "from_memory": True, "correction": posted["id"]}]
    finally:
        two.stop()
        one.stop()
    # A model whose run trained on that correction (its checkpoint says so) is left to decode
    # the close lines by itself; a correction accepted after its run is drawn on again.
    (stored,) = CorrectionStore(store).corrections()
    payload = read_payload(trained["run"] / "published.pt")
    payload["training"] = {
        **(payload.get("training") or {}),
        "corrections": {"store": str(store.resolve()), "until": stored.time},
    }
    write_payload(tmp_path / "trained.pt", payload)
    args[args.index("--checkpoint") + 1] = str(tmp_path / "trained.pt")
    three = Served(*args, log_to=tmp_path / "three.log")
    try:
        learned = three.post("/translate", json={"inputs": [same_words, none]}, headers=AUTH).json()
        assert learned == [before[0], before[2]]
        newer = {"source": "Ein mann sieht einen roten ball.", "corrected": "A man watches a red ball."}
        later = three.post("/corrections", json=newer, headers=AUTH).json()
        again = three.post("/translate", json={"inputs": [same_words]}, headers=AUTH).json()
        assert again[0]["near_matches"] == [later["id"]]
    finally:
        three.stop()
