"""store_terms.py: a store's accepted terms as a glossary, kept up as the log grows, by every
process of the store: a later term of the same source words replaces the earlier, a rejected
one is gone, a hand-edited term without words is left out, and nothing is made again when
nothing changed."""

from __future__ import annotations

import json

from transformer_cli.config_corrections import CorrectionsConfig
from transformer_cli.corrections.guards import guarded
from transformer_cli.corrections.store import TERMS, Correction, CorrectionStore
from transformer_cli.corrections.store_terms import StoreTerms


def _add(folder, *pairs: tuple[str, str]) -> list[Correction]:
    check = guarded(CorrectionsConfig(store=str(folder)), terms=True)
    return CorrectionStore(folder, TERMS).add([Correction(s, t) for s, t in pairs], check)


def _pairs(terms: StoreTerms) -> list[tuple[str, str, str]]:
    return [(t.source, t.target, t.id) for t in terms.glossary().terms]


def test_terms_accepted_by_another_writer_are_seen_at_the_next_call(tmp_path) -> None:
    folder = tmp_path / "store"
    terms = StoreTerms(folder)
    assert _pairs(terms) == []
    hund, leine = _add(folder, ("Hund", "dog"), ("Leine", "leash"))
    assert _pairs(terms) == [("Hund", "dog", hund.id), ("Leine", "leash", leine.id)]
    glossary = terms.glossary()
    assert terms.glossary() is glossary  # nothing changed: not made again
    (again,) = _add(folder, ("HUND!", "hound"))  # the same source words: replaces
    assert _pairs(terms) == [("Leine", "leash", leine.id), ("HUND!", "hound", again.id)]
    assert [t.id for t in terms.glossary().matches("ein hund an der leine")] == [again.id, leine.id]
    CorrectionStore(folder, TERMS).decide([again.id], "rejected")
    assert _pairs(terms) == [("Hund", "dog", hund.id), ("Leine", "leash", leine.id)]
    assert not (folder / "corrections.jsonl").exists()  # terms have a log of their own


def test_a_hand_edited_term_without_words_is_left_out(tmp_path) -> None:
    folder = tmp_path / "store"
    _add(folder, ("Hund", "dog"))
    with open(folder / TERMS, "a", encoding="utf-8") as f:
        f.write(json.dumps({"id": "x", "time": 9e9, "source": "?!", "corrected": "dog", "status": "accepted"}) + "\n")
    assert [t.source for t in StoreTerms(folder).glossary().terms] == ["Hund"]
