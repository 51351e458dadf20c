"""corrections/guards.py: what holds a correction back, each reason said."""

from __future__ import annotations

import time

from transformer_cli.config_corrections import CorrectionsConfig
from transformer_cli.corrections.guards import DAY_S, Guards, guarded, normalised, script
from transformer_cli.corrections.store import Correction


def test_each_guard_holds_with_its_reason_and_a_passing_correction_is_accepted():
    cfg = CorrectionsConfig(store="s", per_client_per_day=2, max_unk_rate=0.3)
    unknown = {"Ein Hund bellt .": 0.0, "A dog barks .": 0.0, "A barking glorp .": 0.5}
    guards = Guards(cfg, [], lambda text: unknown.get(text, 0.0))
    held = {
        "A dog barks . " * 10: "one side is over 3 times longer than the other",
        "Ein Hund bellt .": "the correction is the source itself",
        "Собака лает .": "written in CYRILLIC, the output it corrects in LATIN",
        "A barking glorp .": "50% of its tokens are unknown to the model",
    }
    for corrected, reason in held.items():
        c = guards.check(Correction("Ein Hund bellt .", corrected, output="A dog is barking .", client="x"))
        assert (c.status, c.reasons) == ("held", [reason])
    assert guards.check(Correction("  Ein Hund ", "")).reasons == ["a side without text"]
    ok = guards.check(Correction("Ein Hund bellt .", "A dog barks .", output="A dog is barking .", client="x"))
    assert (ok.status, ok.reasons) == ("accepted", [])
    again = guards.check(Correction("Ein  Hund bellt .", "A dog barks .", client="y"))
    assert again.reasons == ["already accepted"]  # spaces aside


def test_the_cap_counts_a_client_per_day_across_the_store():
    cfg = CorrectionsConfig(store="s", per_client_per_day=2)
    yesterday = time.time() - DAY_S
    known = [Correction(f"Satz {i}", f"Sentence {i}", client="a") for i in range(2)]
    known.append(Correction("Alt", "Old", client="b", time=yesterday))
    check = guarded(cfg)
    assert check(known, Correction("Neu", "New", client="a")).reasons == [
        "the client's 2 corrections of the day are accepted already"
    ]
    assert check(known, Correction("Neu", "New", client="b")).status == "accepted"  # yesterday's do not count


def test_sources_are_matched_in_nfc_with_spaces_collapsed_and_scripts_by_most_letters():
    assert normalised("  Ein   Ma\u0308dchen ") == normalised("Ein M\u00e4dchen") == "Ein M\u00e4dchen"
    assert script("Ein Hund, 2 Katzen") == "LATIN" and script("猫と犬 c") == "CJK" and script("42 !") is None
