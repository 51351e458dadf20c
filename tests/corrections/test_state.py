"""corrections/state.py: the fold a store keeps up from its new records alone equals the fold of
the whole log from nothing, and both equal the rule as written out plainly here (the latest
accepted correction of each source by time, accepted corrections counted per caller and day),
over random sequences of appends, decisions, corrections written again and supersedes, read
by a process that follows the log step by step; and the guards over it decide as over a list."""

from __future__ import annotations

import json
import random
from collections import Counter

from transformer_cli.config_corrections import CorrectionsConfig
from transformer_cli.corrections.guards import guarded
from transformer_cli.corrections.state import DAY_S, Fold, normalised
from transformer_cli.corrections.store import Correction, CorrectionStore

SOURCES = ["Ein Hund .", "Ein  Hund . ", "Eine Katze .", "Ein Baum .", "Ein Haus ."]
CALLERS = ["a", "b", None]


def plain_current(corrections: list[Correction]) -> list[tuple[str, str]]:
    """(source, id) in force, in the order accepted: the rule as the store's docstring says it."""
    latest: dict[str, Correction] = {}
    for c in sorted(corrections, key=lambda c: c.time):  # stable: the log's order breaks ties
        if c.status == "accepted":
            latest.pop(normalised(c.source), None)
            latest[normalised(c.source)] = c
    return [(s, c.id) for s, c in latest.items()]


def plain_per_day(corrections: list[Correction]) -> Counter:
    return Counter((c.caller, int(c.time // DAY_S)) for c in corrections if c.status == "accepted")


def seen_by(fold: Fold) -> tuple[list[tuple[str, str]], Counter, dict[str, str]]:
    known = list(fold.known.values())
    days = plain_per_day(known)
    counted = Counter({key: fold.accepted_on(*key) for key in days})
    statuses = {c.id: c.status for c in known}
    assert all(fold.in_force(s) is not None for s, _ in plain_current(known))
    return [(s, c.id) for s, c in fold.current().items()], counted, statuses


def random_step(rng: random.Random, store: CorrectionStore, ids: list[str], t0: float) -> None:
    """One random thing a writer does to the log: append corrections (times out of order, ties,
    other days), decide on some, or write a known correction again with another time or status."""
    kind = rng.random()
    if kind < 0.5 or not ids:
        made = [
            Correction(
                rng.choice(SOURCES),
                f"Fix {rng.randrange(4)} .",
                time=t0 + rng.choice([0, 1, 2, rng.random() * 3, DAY_S]),
                status=rng.choice(["accepted", "accepted", "held"]),
                caller=rng.choice(CALLERS),
            )
            for _ in range(rng.randint(1, 3))
        ]
        store.add(made)
        ids += [c.id for c in made]
    elif kind < 0.85:
        store.decide(rng.sample(ids, min(len(ids), rng.randint(1, 2))), rng.choice(["accepted", "rejected"]))
    else:  # a correction written again: the later record replaces the earlier, in its place
        again = {"id": rng.choice(ids), "source": rng.choice(SOURCES), "corrected": "Again .", "time": t0 + 1.5}
        with open(store.path, "a", encoding="utf-8") as f:
            f.write(json.dumps({**again, "status": rng.choice(["accepted", "held"]), "caller": "a"}) + "\n")


def test_the_fold_kept_up_from_new_records_equals_the_fold_of_the_whole_log(tmp_path):
    for seed in range(12):
        rng, folder = random.Random(seed), tmp_path / f"s{seed}"
        writer, follower = CorrectionStore(folder), CorrectionStore(folder)
        ids: list[str] = []
        for _ in range(60):
            random_step(rng, writer, ids, t0=1_700_000_000.0)
            if rng.random() < 0.5:
                follower.refresh()  # what a server does before each request
        follower.refresh()
        from_nothing = CorrectionStore(folder)
        from_nothing.refresh()
        every = from_nothing.corrections()
        expected = (plain_current(every), plain_per_day(every), {c.id: c.status for c in every})
        assert seen_by(follower._state) == seen_by(from_nothing._state) == expected, seed
        assert [c.id for c in follower.current().values()] == [i for _, i in expected[0]]


def test_the_guards_over_the_fold_and_the_pending_append_decide_as_over_the_list(tmp_path):
    """A check over the store's fold (and what the same append accepted before it) gives each
    correction the status and reasons the guards give over the list of every correction."""
    cfg = CorrectionsConfig(store="s", per_client_per_day=5)
    rng, check = random.Random(7), guarded(cfg)
    store, known = CorrectionStore(tmp_path / "s"), []
    for _ in range(30):
        batch = [
            Correction(rng.choice(SOURCES), f"Fix {rng.randrange(3)} .", caller=rng.choice(CALLERS[:2]))
            for _ in range(rng.randint(1, 4))
        ]
        twins = [Correction(c.source, c.corrected, id=c.id, time=c.time, caller=c.caller) for c in batch]
        store.add(batch, check)
        for twin in twins:
            known.append(check(list(known), twin))
        assert [(c.status, c.reasons) for c in batch] == [(c.status, c.reasons) for c in twins]
    reasons = {r for c in known for r in c.reasons}
    assert reasons == {"already accepted", "the caller's 5 corrections of the day are accepted already"}
