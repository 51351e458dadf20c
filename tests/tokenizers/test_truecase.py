"""tokenizers/truecase.py: each word's most frequent spelling, given back to sources typed without
casing; and the truecaser's way from the preprocessed folder into checkpoints and exports."""

from __future__ import annotations

import pytest
from helpers import sentence_pairs, write_config

from transformer_cli.config_loading import load_config
from transformer_cli.data.preprocess import prepare
from transformer_cli.tokenizers.pair import TokenizerPair
from transformer_cli.tokenizers.truecase import Truecaser, has_no_casing

TRAINING = [
    "Ein Mann fährt Fahrrad.",
    "Zwei Hunde spielen im Schnee.",
    "Hunde essen, ein Mann sieht zu.",
    "Der Mann mit dem Essen lacht.",
    "Leute essen draußen.",
    "Essen ist Fahrrad.",  # a sentence-initial capital says nothing about the word
]


def test_the_most_frequent_spelling_wins_and_sentence_initial_words_do_not_count():
    truecaser = Truecaser.fit(TRAINING)
    assert truecaser.spellings["mann"] == "Mann" and truecaser.spellings["hunde"] == "Hunde"
    assert "essen" not in truecaser.spellings  # "essen" 2x, "Essen" 1x inside sentences
    assert "ein" not in truecaser.spellings and "zwei" not in truecaser.spellings


def test_only_sources_without_casing_are_recased():
    truecaser = Truecaser.fit(TRAINING)
    assert truecaser.recase("ein mann fährt fahrrad .") == "Ein Mann fährt Fahrrad ."
    assert truecaser.recase("ZWEI HUNDE ESSEN IM SCHNEE!") == "Zwei Hunde essen im Schnee!"
    assert truecaser.recase("  „hunde“ essen") == "  „Hunde“ essen"  # the first letter, not character
    for as_typed in ("ein Mann fährt fahrrad", "Ein mann", "x", "1234 .", "iPhone"):
        assert truecaser.recase(as_typed) == as_typed
    assert [has_no_casing(x) for x in ("abc", "ABC 12", "aBc", "a", "12")] == [True, True, False, False, False]


def test_the_state_round_trips_and_a_crafted_one_is_refused():
    truecaser = Truecaser.fit(TRAINING)
    assert Truecaser.from_state(truecaser.state()).spellings == truecaser.spellings
    for bad in (["mann"], {"mann": 3}, "Mann"):
        with pytest.raises(ValueError, match="truecaser"):
            Truecaser.from_state(bad)


def _corpus_with_nouns(folder):
    """The synthetic corpus with its German nouns capitalized, as German writes them."""
    nouns = ("mann", "frau", "kind", "ball", "buch", "hut", "park", "strand")
    folder.mkdir()
    for i, (split, n) in enumerate({"train": 200, "val": 20, "test_2016_flickr": 20}.items()):
        pairs = sentence_pairs(n, seed=i)
        de = [" ".join(w.capitalize() if w in nouns else w for w in d.split(" ")) for d, _ in pairs]
        (folder / f"{split}.de").write_text("".join(f"{x}\n" for x in de), encoding="utf-8")
        (folder / f"{split}.en").write_text("".join(f"{e}\n" for _, e in pairs), encoding="utf-8")
    return folder


def test_a_prepared_folder_gives_its_tokenizers_a_truecaser_that_travels_in_their_state(tmp_path):
    path = write_config(
        tmp_path / "tc.yaml",
        tmp_path,
        _corpus_with_nouns(tmp_path / "corpus"),
        tokenizer={"kind": "sentencepiece", "vocab_size": 120, "joint": True},
    )
    prepared, _ = prepare(load_config(str(path)))
    pair = prepared.tokenizers
    expected = Truecaser.fit(prepared.text("train", "de")).spellings
    assert pair.recaser is not None and pair.recaser.spellings == expected
    assert expected["mann"] == "Mann" and "sieht" not in expected
    again = TokenizerPair.from_state(pair.state())  # as a checkpoint stores and loads it
    assert again.recaser is not None and again.recaser.spellings == expected
    assert again.recase_sources(["eine frau sieht einen ball .", "EIN KIND", "Ein mann"]) == [
        "Eine Frau sieht einen Ball .",
        "Ein Kind",
        "Ein mann",
    ]


def test_lowercasing_tokenizers_get_no_truecaser(tmp_path, corpus_dir):
    path = write_config(
        tmp_path / "lc.yaml",
        tmp_path,
        corpus_dir,
        tokenizer={"kind": "sentencepiece", "vocab_size": 120, "joint": True, "lowercase": True},
    )
    prepared, _ = prepare(load_config(str(path)))
    assert prepared.tokenizers.recaser is None and "source_truecaser" not in prepared.tokenizers.state()
