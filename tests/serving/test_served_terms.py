"""POST /terms and the terms a correction carries, with real `tfm serve` processes and an HTTP
client: a term posted to one server of a store is used by another at its next request, the
answer saying which stored term it was; a line holding no term is answered exactly as before;
a malformed post is a 422 naming the field."""

from __future__ import annotations

from serving.serve_helpers import AUTH, SENTENCES, Served, corrections_args


def test_a_term_posted_to_one_server_is_used_by_every_server_from_its_next_request(trained, tmp_path):
    args, store = corrections_args(trained, tmp_path)
    one = Served(*args, log_to=tmp_path / "one.log")
    two = Served(*args, log_to=tmp_path / "two.log")
    try:
        lines = [SENTENCES[0], SENTENCES[1]]  # a ball; no term of the store
        before = two.post("/translate", json={"inputs": lines}, headers=AUTH).json()
        assert not any("terms" in item for item in before) and "flower" not in before[0]["translation_text"]
        posted = one.post(
            "/terms", json={"terms": [{"source": "Ball", "target": "flower"}], "client": "desk"}, headers=AUTH
        )
        assert posted.status_code == 200, posted.text
        ((term),) = posted.json()["terms"]
        assert term["status"] == "accepted" and term["reasons"] == []
        after = two.post("/translate", json={"inputs": lines}, headers=AUTH).json()
        assert "flower" in after[0]["translation_text"].lower()
        assert after[0]["terms"] == [{"source": "Ball", "target": "flower", "used": "placed", "term": term["id"]}]
        assert after[1] == before[1]
        fix = {
            "source": SENTENCES[2],
            "corrected": "A child holds a cap.",
            "terms": [{"source": "hut", "target": "cap"}],
        }
        answer = one.post("/corrections", json=fix, headers=AUTH).json()
        assert answer["status"] == "accepted" and [t["status"] for t in answer["terms"]] == ["accepted"]
        hat = two.post("/translate", json={"inputs": [SENTENCES[5]]}, headers=AUTH).json()
        assert "cap" in hat[0]["translation_text"].lower() and hat[0]["terms"][0]["term"] == answer["terms"][0]["id"]
        again = one.post("/terms", json={"source": "BALL", "target": "flower"}, headers=AUTH).json()
        assert [t["reasons"] for t in again["terms"]] == [["already accepted"]]
        for body, problem in (
            ({"terms": []}, "terms: a list of 1 to 1000 terms is required"),
            ({"terms": [{"source": "Hund"}]}, "terms[0].target: a non-empty string is required"),
            ({"terms": ["Hund"]}, 'terms[0]: a term is {"source": ..., "target": ...}'),
            ({"target": "dog"}, "source: a non-empty string is required"),
            ([1], "send a JSON object"),
        ):
            r = one.post("/terms", json=body, headers=AUTH)
            assert r.status_code == 422 and r.json()["error"].startswith(problem), (body, r.text)
        assert one.post("/terms", json={"source": "Hund", "target": "dog"}).status_code == 401
    finally:
        two.stop()
        one.stop()
    assert (store / "terms.jsonl").exists() and (store / "corrections.jsonl").exists()
