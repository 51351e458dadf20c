"""corrections/nearby.py: the near-matches of a line among the corrections in force, found by
the words they share weighed by rarity; an index kept up from the fold's changes alone equals
one built from nothing, through appends, rejections, supersedes and a store read anew."""

from __future__ import annotations

import math
import random

import pytest

from transformer_cli.corrections.correction import Correction
from transformer_cli.corrections.nearby import NearbySources, words
from transformer_cli.corrections.state import Fold
from transformer_cli.corrections.store import CorrectionStore

SOURCES = [
    "Ein brauner Hund rennt im Gras.",
    "Ein schwarzer Hund springt über einen Zaun.",
    "Zwei Hunde spielen im Schnee.",
    "Ein Mann fährt Fahrrad.",
    "Eine Frau liest ein Buch im Park.",
    "Ein Kind spielt im Gras.",
]


def fixed(source: str, i: int, **kw) -> Correction:
    return Correction(source, f"translation {i}", time=float(i), **kw)


def index_of(fold: Fold) -> NearbySources:
    index = NearbySources()
    index.follow(fold)
    return index


def answers(index: NearbySources, lines: list[str]) -> list[list[tuple[str, float]]]:
    return [[(m.correction.id, round(m.similarity, 9)) for m in index.near(line, 5, 0.0)] for line in lines]


def test_words_are_lower_cased_letters_and_digits_in_any_script():
    assert words("Ein  HUND, 2 Katzen!") == {"ein", "hund", "2", "katzen"}
    assert words("Ein Hund.") == words("ein hund")


def test_the_closest_come_first_and_rare_shared_words_weigh_more():
    fold = Fold.of(fixed(s, i) for i, s in enumerate(SOURCES))
    index = index_of(fold)
    found = index.near("Ein brauner Hund springt über einen Zaun.", 3, 0.0)
    assert [m.correction.source for m in found[:2]] == [SOURCES[1], SOURCES[0]]
    # "Hund" and "Gras" are rarer than "im": sharing them counts for more than sharing "im"
    dog, grass = index.near("Hund im Gras", 6, 0.0)[:2]
    assert {dog.correction.source, grass.correction.source} == {SOURCES[0], SOURCES[5]}
    assert dog.similarity > 0.3
    n = len(SOURCES)
    idf = {w: math.log1p(n / df) for w, df in {"hund": 2, "im": 4, "gras": 2}.items()}
    rest = {"ein": 5, "brauner": 1, "rennt": 1}
    others = sum(math.log1p(n / df) for df in rest.values())
    expected = (idf["hund"] + idf["im"] + idf["gras"]) / (sum(idf.values()) + others)
    assert next(m for m in (dog, grass) if m.correction.source == SOURCES[0]).similarity == pytest.approx(expected)


def test_the_least_similarity_the_count_and_the_lines_own_source():
    fold = Fold.of(fixed(s, i) for i, s in enumerate(SOURCES))
    index = index_of(fold)
    assert index.near("Ein Flugzeug landet.", 5, 0.2) == []  # shares "ein" alone
    assert index.near("Ein Flugzeug landet.", 5, 0.0)  # but shares it
    assert index.near("Ganz andere Wörter", 5, 0.0) == []
    assert len(index.near("Ein Hund", 1, 0.0)) == 1
    assert SOURCES[3] not in [m.correction.source for m in index.near(SOURCES[3], 6, 0.0)]  # the memory's


def test_kept_up_from_the_folds_changes_it_equals_an_index_built_from_nothing():
    rng = random.Random(7)
    fold, index = Fold(), NearbySources()
    lines = [*SOURCES, "Ein Hund spielt im Gras mit einem Kind.", "Eine Frau fährt im Park Fahrrad."]
    made: list[Correction] = []
    for step in range(300):
        roll = rng.random()
        if roll < 0.55 or not made:  # a new correction (of a source seen before, or not)
            c = fixed(rng.choice(SOURCES) + rng.choice(["", " Heute."]), step)
            made.append(c)
            fold.put(c)
        else:  # a decision on an earlier one
            fold.decide(rng.choice(made).id, rng.choice(["rejected", "accepted"]))
        if rng.random() < 0.3:
            index.follow(fold)
            assert answers(index, lines) == answers(index_of(fold), lines)
    index.follow(fold)
    assert answers(index, lines) == answers(index_of(fold), lines)
    assert len(index) == len(fold.current())


def test_a_superseded_or_rejected_correction_is_no_longer_found():
    first, later = fixed(SOURCES[0], 1), fixed(SOURCES[0], 2)
    fold = Fold.of([first, later])
    index = index_of(fold)
    assert [m.correction.id for m in index.near("brauner Hund", 5, 0.0)] == [later.id]
    fold.decide(later.id, "rejected")
    index.follow(fold)
    assert [m.correction.id for m in index.near("brauner Hund", 5, 0.0)] == [first.id]
    fold.decide(first.id, "rejected")
    index.follow(fold)
    assert index.near("brauner Hund", 5, 0.0) == []


def test_a_store_read_anew_after_compaction_is_indexed_whole(tmp_path):
    store = CorrectionStore(tmp_path / "store")
    store.add([fixed(s, i) for i, s in enumerate(SOURCES)])
    store.refresh()
    index = index_of(store.fold)
    writer = CorrectionStore(tmp_path / "store")
    writer.decide([writer.corrections()[0].id], "rejected")
    writer.compact()
    writer.add([fixed("Ein grauer Hund schläft.", 99)])
    store.refresh()
    index.follow(store.fold)
    assert answers(index, ["Ein Hund"]) == answers(index_of(store.fold), ["Ein Hund"])
    assert SOURCES[0] not in [m.correction.source for m in index.near("Ein brauner Hund", 9, 0.0)]


def test_corrections_the_model_was_trained_on_are_left_to_it():
    fold = Fold.of(fixed(s, i) for i, s in enumerate(SOURCES))  # accepted at times 0..5
    index = index_of(fold)
    everything = index.near("Ein Hund im Gras", 9, 0.0)
    newer = index.near("Ein Hund im Gras", 9, 0.0, after=2.0)
    assert {m.correction.time for m in newer} == {m.correction.time for m in everything} - {0.0, 1.0, 2.0}
    assert newer and all(m.correction.time > 2.0 for m in newer)
    assert index.near("Ein Hund im Gras", 9, 0.0, after=5.0) == []


def test_among_sources_sharing_as_much_the_shorter_are_scored_first():
    """More sources than are scored in full share the line's one rare word equally: the short
    one, which has fewest words the line lacks and so the highest similarity, is among those
    scored, however late it came."""
    long_ones = [f"Ein Hund mit {i} langen roten Leinen läuft {i} Mal durch den Park ." for i in range(3000)]
    corrections = [fixed(s, i) for i, s in enumerate([*long_ones, "Ein Hund ."])]
    index = NearbySources()
    index.follow(Fold.of(corrections))
    (best,) = index.near("Der Hund schläft .", 1, 0.0)
    assert best.correction.source == "Ein Hund ."
