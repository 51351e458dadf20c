"""tokenizers/growth_reach.py: a grown SentencePiece vocabulary encodes otherwise only lines
whose normalized text holds an added piece (held to SentencePiece itself, line by line, for BPE
and unigram, lowercased or not, over odd spacing, other Unicode forms, unknown characters and
marks), and a unigram growth it cannot vouch for says why; the one pattern that finds the
lines finds exactly those that hold a piece, whatever the pieces spell."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
from helpers import poodle_pairs, sentence_pairs

from transformer_cli.config import TokenizerConfig
from transformer_cli.tokenizers.growth import GrowthRule, appended, new_pieces, scored
from transformer_cli.tokenizers.growth_reach import Reach, any_of, reach
from transformer_cli.tokenizers.subword import SubwordTokenizer
from transformer_cli.tokenizers.vocab import Vocab
from transformer_cli.tokenizers.word import WordTokenizer

OLD = [side for pair in sentence_pairs(300, seed=1) for side in pair]
NEW = OLD + [side for pair in poodle_pairs(80, seed=2) for side in pair]
ODD = [
    "  Ein   Pudel  läuft ",
    "EIN PUDEL",
    "ein pudel",
    "Ｐｕｄｅｌ ﬁ",
    "Ein Pudel ☃ ß",
    "<m> pudel",
    "",
    "pudelpudel",
]


def _grown(model_type: Any, lowercase: bool) -> tuple[SubwordTokenizer, SubwordTokenizer]:
    settings = TokenizerConfig(kind="sentencepiece", model_type=model_type, vocab_size=70, lowercase=lowercase)
    old = SubwordTokenizer.train(OLD, settings, 1, ("<m>",))
    fitted = SubwordTokenizer.train(NEW, settings, 1, ("<m>",))
    growth = new_pieces(old, fitted, NEW, GrowthRule(2, 40))
    return old, appended(old, scored(old, fitted, growth.added))


@pytest.mark.parametrize("model_type", ["bpe", "unigram"])
@pytest.mark.parametrize("lowercase", [False, True])
def test_only_lines_that_hold_an_added_piece_are_encoded_otherwise(model_type, lowercase):
    old, grown = _grown(model_type, lowercase)
    found = reach(old, grown)
    assert isinstance(found, Reach) and len(found.added) == grown.vocab_size - old.vocab_size > 0
    lines = NEW + ODD
    touched = found.touched(lines)
    changed = np.array([a != b for a, b in zip(old.encode_batch(lines), grown.encode_batch(lines))])
    assert changed.any() and not (changed & ~touched).any()  # no line changed that was not found
    expected = [any(p in grown.sp.normalize(x.lower() if lowercase else x) for p in found.added) for x in lines]
    assert touched.tolist() == expected
    assert not touched[: len(OLD)].all()


def test_a_unigram_piece_scored_above_the_old_ones_cannot_be_vouched_for():
    old, _ = _grown("unigram", False)
    assert reach(old, appended(old, [("▁pudel", 1.0)])) == (
        "a unigram piece was added with a score outside the old pieces' range"
    )
    assert isinstance(reach(old, appended(old, [("▁pudel", -5.0)])), Reach)


def test_a_tokenizer_that_did_not_grow_changes_no_line_and_another_is_no_growth():
    old, grown = _grown("bpe", False)
    same = reach(grown, grown)
    assert isinstance(same, Reach) and not same.touched(NEW).any()
    assert reach(grown, old) is None  # fewer pieces
    word = WordTokenizer("de", Vocab(["<unk>", "<pad>", "<sos>", "<eos>", "pudel"]), False, (), ())
    assert reach(word, word) is None


def test_the_pattern_finds_exactly_the_lines_that_hold_a_piece_once_each():
    rng = random.Random(0)
    alphabet = "ab▁.*(|\\?[]é"
    for _ in range(300):
        pieces = ["".join(rng.choices(alphabet, k=rng.randint(1, 4))) for _ in range(rng.randint(1, 6))]
        lines = ["".join(rng.choices(alphabet, k=rng.randint(0, 12))) for _ in range(20)]
        pattern = any_of(pieces)
        assert pattern is not None
        found = [m.start() for m in pattern.finditer("\n".join(lines))]
        starts = [sum(len(x) + 1 for x in lines[:k]) for k in range(len(lines))]
        holds = [k for k, line in enumerate(lines) if any(p in line for p in pieces)]
        assert [max(k for k, s in enumerate(starts) if s <= at) for at in found] == holds, (pieces, lines)


def test_pieces_that_hold_another_are_left_to_it_and_no_pieces_find_nothing():
    pattern = any_of(["▁pudel", "▁pu", "▁pude", "del"])
    assert pattern is not None and "pudel" not in pattern.pattern and "del" in pattern.pattern
    assert any_of([]) is None
