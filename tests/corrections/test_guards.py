"""corrections/guards.py: what holds a correction back, each reason said."""

from __future__ import annotations

import time

from transformer_cli.config_corrections import CorrectionsConfig
from transformer_cli.corrections.guards import DAY_S, Guards, guarded, script, shared, trigrams
from transformer_cli.corrections.memory import TranslationMemory
from transformer_cli.corrections.state import normalised
from transformer_cli.corrections.store import Correction, CorrectionStore
from transformer_cli.corrections.training import accepted


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


def test_a_correction_a_later_one_replaced_is_accepted_again_and_is_the_current_one(tmp_path):
    """ "already accepted" is measured against the correction now in force for the source, not
    against every correction it ever had."""
    store, check = CorrectionStore(tmp_path / "s"), guarded(CorrectionsConfig(store="s"))
    memory = TranslationMemory(store)
    t = time.time() - 10
    first, later = Correction("Ein Hund .", "A dog .", time=t), Correction("Ein  Hund .", "One dog .", time=t + 1)
    store.add([first, later], check)
    (again,) = store.add([Correction("Ein Hund .", "A dog . ", time=t + 2)], check)
    assert (again.status, again.reasons) == ("accepted", [])
    memory.refresh()
    assert (memory.lookup("Ein Hund .").translation, memory.lookup("Ein Hund .").id) == ("A dog . ", again.id)
    assert [c.id for c in accepted(store)] == [again.id]
    (repeated,) = store.add([Correction("Ein Hund .", "A dog .", time=t + 3)], check)
    assert (repeated.status, repeated.reasons) == ("held", ["already accepted"])  # the current one, again


def test_the_cap_counts_a_caller_per_day_across_the_store_whatever_clients_it_names():
    cfg = CorrectionsConfig(store="s", per_client_per_day=2)
    yesterday = time.time() - DAY_S
    known = [Correction(f"Satz {i}", f"Sentence {i}", client=f"c{i}", caller="a") for i in range(2)]
    known.append(Correction("Alt", "Old", caller="b", time=yesterday))
    check = guarded(cfg)
    assert check(known, Correction("Neu", "New", client="c9", caller="a")).reasons == [
        "the caller's 2 corrections of the day are accepted already"
    ]
    from_b = Correction("Neu", "New", client="c0", caller="b")
    assert check(known, from_b).status == "accepted"  # yesterday's do not count


def test_sources_are_matched_in_nfc_with_spaces_collapsed_and_scripts_by_most_letters():
    assert normalised("  Ein   Ma\u0308dchen ") == normalised("Ein M\u00e4dchen") == "Ein M\u00e4dchen"
    assert script("Ein Hund, 2 Katzen") == "LATIN" and script("猫と犬 c") == "CJK" and script("42 !") is None


def test_a_correction_in_the_source_language_is_held_and_a_rewording_is_not():
    """Measured on validation's 946 non-dog pairs with a trained model's outputs: the reference
    as the correction is held 3 times (each restoring names the output had lost), the source
    with a word dropped 946 times, an unrelated German sentence 918 times
    (benchmarks/correction_guards.py)."""
    source, output = "Zwei Hunde spielen im Schnee .", "Two dogs play in the snow ."
    reason = "it reads more like the source than like the output it corrects (the source's language?)"
    guards = Guards(CorrectionsConfig(store="s"), [], None)
    assert guards.check(Correction(source, "Zwei Hunde toben im Schnee .", output=output)).reasons == [reason]
    assert guards.check(Correction(source, "Two puppies are romping in the snow .", output=output)).status == "accepted"
    assert guards.check(Correction(source, "Zwei Hunde toben im Tiefschnee .")).status == "accepted"  # no output
    off = Guards(CorrectionsConfig(store="s", same_language=False), [], None)
    assert off.check(Correction(source, "Zwei Hunde toben im Schnee .", output=output)).status == "accepted"
    assert trigrams("Im Schnee!") == {" im", "im ", "m s", " sc", "sch", "chn", "hne", "nee", "ee "}
    assert shared("im Schnee", "Schnee") == 6 / 9 and shared("42 !", "Schnee") == 0.0


def test_terms_have_guards_of_their_own_and_count_apart_from_corrections(tmp_path):
    """A name kept as it is passes (Berlin -> Berlin), a sentence does not pass as a term, the
    same source words in another case are the same term, and a caller's cap counts its terms
    in the terms log alone."""
    cfg = CorrectionsConfig(store=str(tmp_path / "s"), per_client_per_day=2, max_unk_rate=0.3)
    guards = Guards(cfg, [], lambda text: 0.5 if text == "glorp" else 0.0, terms=True)
    assert guards.check(Correction("Berlin", "Berlin", caller="a")).status == "accepted"
    assert guards.check(Correction("?", "dog", caller="b")).reasons == ["a side without text"]
    sentence = "Ein Mann mit einem roten Hut steht neben einem Hund im Park ."
    assert guards.check(Correction(sentence, "A man", caller="b")).reasons == [
        "a side of 12 words: a term has at most 8 (a sentence is a correction)"
    ]
    assert guards.check(Correction("Hund", "glorp", caller="b")).reasons == [
        "50% of its tokens are unknown to the model"
    ]
    assert guards.check(Correction("Hund", "dog", caller="b")).status == "accepted"
    assert guards.check(Correction("HUND!", "dog", caller="c")).reasons == ["already accepted"]
    assert guards.check(Correction("Ei", "egg", caller="a")).status == "accepted"
    assert guards.check(Correction("Leine", "leash", caller="a")).reasons == [
        "the caller's 2 corrections of the day are accepted already"
    ]
    sentences = CorrectionStore(tmp_path / "s")  # a's corrections are counted apart from its terms
    (c,) = sentences.add([Correction("Ein Hund .", "A dog .", caller="a")], guarded(cfg))
    assert c.status == "accepted"
