"""Users' reports on `tfm serve`'s corrections, on the real server with a real HTTP client: a
damaged line of the store's log once made every /translate answer 500, and the limits counted
the "client" a caller names in its body, so one caller naming a new client each time was never
limited."""

from __future__ import annotations

import json
from pathlib import Path

from serving.serve_helpers import AUTH, SENTENCES, Served, corrections_args

from transformer_cli.corrections.store import Correction, CorrectionStore

FIX = "A man looks at a ball."


def _translate(server: Served, lines: list[str]) -> list[dict]:
    r = server.post("/translate", json={"inputs": lines}, headers=AUTH)
    assert r.status_code == 200, r.text
    return r.json()


def _damage(log: Path) -> list[int]:
    """Append lines that hold no correction (a hand edit's trailing comma, a list, a number as
    source) to `log`; their line numbers."""
    hand_made = json.dumps({"id": "fixed-by-hand", "source": SENTENCES[2], "corrected": "A child holds a big hat."})
    first = len(log.read_text(encoding="utf-8").splitlines()) + 1
    with open(log, "a", encoding="utf-8") as f:
        f.write(hand_made[:-1] + ",}\n")
        f.write("[1, 2]\n")
        f.write(json.dumps({"id": "n", "source": 5, "corrected": "Five ."}) + "\n")
    return [first, first + 1, first + 2]


def test_a_damaged_log_is_skipped_said_once_a_line_and_the_rest_still_answers(trained, tmp_path):
    args, folder = corrections_args(trained, tmp_path)
    store = CorrectionStore(folder)
    (fix,) = store.add([Correction(SENTENCES[0], FIX)])
    server = Served(*args, log_to=tmp_path / "serve.log")
    try:
        damaged = _damage(store.path)
        for _ in range(3):  # each request reads the log again: the damage is said once all the same
            answers = _translate(server, [SENTENCES[0], SENTENCES[2]])
            assert answers[0] == {"translation_text": FIX, "from_memory": True, "correction": fix.id}
            assert "from_memory" not in answers[1]
        posted = {"source": SENTENCES[3], "corrected": "Two dogs carry a bike."}
        r = server.post("/corrections", json=posted, headers=AUTH)
        assert r.status_code == 200 and r.json()["status"] == "accepted", r.text
        assert _translate(server, [SENTENCES[3]])[0]["correction"] == r.json()["id"]
        said = [line for line in server.tfm.stderr.splitlines() if "line skipped" in line]
        assert [line.split(": ", 2)[1] for line in said] == [f"{store.path}:{n}" for n in damaged]
        # fixed by hand, in place, while it serves: the fixed line is read, the rest still answers
        lines = store.path.read_text(encoding="utf-8").splitlines()
        lines[damaged[0] - 1] = lines[damaged[0] - 1].replace(",}", "}")
        store.path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
        answers = _translate(server, [SENTENCES[2], SENTENCES[3], SENTENCES[0]])
        assert [a.get("correction") for a in answers] == ["fixed-by-hand", r.json()["id"], fix.id]
        assert server.get("/health").json()["status"] == "ok"
    finally:
        assert server.stop() == 0


def _post_seven(server: Served, client_of: list[str]) -> list[tuple[int, str]]:
    """(HTTP status, correction status or error) of seven corrections posted one after the other."""
    answers = []
    for i, client in enumerate(client_of):
        body = {"source": f"Ein Satz {i} .", "corrected": f"A sentence {i} .", "client": client}
        r = server.post("/corrections", json=body, headers=AUTH)
        answers.append((r.status_code, r.json().get("status") or r.json()["error"]))
    return answers


def test_one_caller_is_limited_as_one_whatever_client_it_names(trained, tmp_path):
    """One caller naming a new "client" in each body once had each counted as a client of its
    own: 200 corrections in 1.7 s, all accepted, under per_minute 30 and per_client_per_day 20."""
    limits = ("corrections.per_minute=6", "corrections.per_client_per_day=3")
    servers, stores = [], []
    for name in ("fixed", "varied"):
        (tmp_path / name).mkdir()
        args, store = corrections_args(trained, tmp_path / name, *limits)
        servers.append(Served(*args, log_to=tmp_path / f"{name}.log"))
        stores.append(store)
    try:
        fixed = _post_seven(servers[0], ["editor-1"] * 7)
        varied = _post_seven(servers[1], [f"editor-{i}" for i in range(7)])
    finally:
        assert [s.stop() for s in servers] == [0, 0]
    minute = "more than 6 corrections a minute from address 127.0.0.1 (corrections.per_minute)"
    assert fixed == varied == [(200, "accepted")] * 3 + [(200, "held")] * 3 + [(429, minute)]
    stored = CorrectionStore(stores[1]).corrections()
    assert [(c.client, c.caller) for c in stored] == [(f"editor-{i}", "address 127.0.0.1") for i in range(6)]
    assert stored[3].reasons == ["the caller's 3 corrections of the day are accepted already"]
