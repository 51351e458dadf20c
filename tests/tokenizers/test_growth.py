"""Growing a SentencePiece vocabulary (tokenizers/growth.py): the pieces a tokenizer fitted on
new text has and the old one lacks are appended after the old ones, every old id keeps its
piece, old text keeps its segmentation, and the new words take fewer pieces; for BPE and
unigram models alike."""

from __future__ import annotations

from typing import Any

import pytest
from helpers import poodle_pairs, sentence_pairs

from transformer_cli.config import TokenizerConfig
from transformer_cli.tokenizers.growth import GrowthRule, appended, is_bpe, new_pieces, normal_scores, scored, tiling
from transformer_cli.tokenizers.subword import SubwordTokenizer


def _lines(pairs: list[tuple[str, str]]) -> list[str]:
    return [side for pair in pairs for side in pair]


OLD = _lines(sentence_pairs(300, seed=1))
TOPIC = poodle_pairs(60, seed=2)  # a topic the old text lacks
NEW = OLD + _lines(TOPIC)


def _pieces(tokenizer: SubwordTokenizer, lines: list[str]) -> int:
    return sum(len(ids) for ids in tokenizer.encode_batch(lines))


def _fitted(model_type: Any, vocab_size: int) -> tuple[SubwordTokenizer, SubwordTokenizer]:
    settings = TokenizerConfig(kind="sentencepiece", model_type=model_type, vocab_size=vocab_size)
    return SubwordTokenizer.train(OLD, settings, 1), SubwordTokenizer.train(NEW, settings, 1)


def _check_appended(old: SubwordTokenizer, grown: SubwordTokenizer, added: tuple[str, ...]) -> None:
    assert grown.vocab_size == old.vocab_size + len(added)
    assert grown.id_to_token(range(old.vocab_size)) == old.id_to_token(range(old.vocab_size))
    assert grown.id_to_token(range(old.vocab_size, grown.vocab_size)) == list(added)
    topic = _lines(TOPIC)
    assert [grown.decode(ids) for ids in grown.encode_batch(topic)] == topic


def test_bpe_pieces_are_appended_with_the_joins_that_reach_them_and_old_text_keeps_its_pieces():
    old, fitted = _fitted("bpe", 220)
    growth = new_pieces(old, fitted, NEW, GrowthRule(min_count=20, max_pieces=100))
    assert "▁pudel" in growth.added and "▁poodle" in growth.added
    # the old model spells "pudel" `▁p` `u` `de` `l`: BPE joins two pieces at a time
    assert growth.added[growth.added.index("▁pudel") - 2 :][:3] == ("▁pu", "▁pude", "▁pudel")
    assert growth.joins >= 2 and not set(old.id_to_token(range(old.vocab_size))) & set(growth.added)

    grown = appended(old, scored(old, fitted, growth.added))
    _check_appended(old, grown, growth.added)
    assert grown.encode_batch(OLD) == old.encode_batch(OLD)  # the old text is spelled as before
    spelled = grown.id_to_token(grown.encode("Ein pudel hält einen hut."))
    assert spelled == ["▁Ein", "▁pudel", "▁hält", "▁einen", "▁hut", "."]
    # a grown model grows again: appended after its own new pieces
    again = appended(grown, [("▁Zz", grown.sp.get_score(grown.vocab_size - 1) - 1.0)])
    assert again.id_to_token([grown.vocab_size]) == ["▁Zz"] and again.encode_batch(OLD) == old.encode_batch(OLD)


def test_unigram_pieces_are_appended_with_the_fitted_models_scores():
    old, fitted = _fitted("unigram", 70)
    growth = new_pieces(old, fitted, NEW, GrowthRule(min_count=20, max_pieces=100))
    assert growth.added and growth.joins == 0  # no joins: unigram scores every segmentation
    pieces = scored(old, fitted, growth.added)
    assert [s for _, s in pieces] == [fitted.sp.get_score(fitted.sp.piece_to_id(p)) for p in growth.added]
    grown = appended(old, pieces)
    _check_appended(old, grown, growth.added)
    topic = _lines(TOPIC)
    assert _pieces(grown, topic) < _pieces(old, topic)


def test_the_rule_keeps_the_most_used_pieces_above_the_minimum_count():
    old, fitted = _fitted("unigram", 70)  # (no joins: the pieces are those the rule keeps)
    everything = new_pieces(old, fitted, NEW, GrowthRule(min_count=1, max_pieces=1000))
    assert everything.over_cap == 0
    capped = new_pieces(old, fitted, NEW, GrowthRule(min_count=1, max_pieces=2))
    assert len(capped.added) == 2 and capped.over_cap == len(everything.added) - 2
    counts = {p: sum(ids.count(fitted.sp.piece_to_id(p)) for ids in fitted.encode_batch(NEW)) for p in everything.added}
    assert min(counts[p] for p in capped.added) >= max(n for p, n in counts.items() if p not in capped.added)
    none = new_pieces(old, fitted, NEW, GrowthRule(min_count=10_000, max_pieces=1000))
    assert none.added == () and none.too_rare == len(everything.added) + everything.too_rare


def test_a_new_piece_is_spelled_by_the_longest_old_pieces():
    old = _fitted("bpe", 220)[0]
    ids = tiling(old, "▁pudel")
    assert "".join(old.id_to_token(ids)) == "▁pudel"
    assert old.ids.unk not in ids
    assert tiling(old, "▁pudel€") == [*ids, old.ids.unk]  # a character it lacks: <unk>


def test_a_models_type_and_its_normal_pieces_scores_are_read_from_its_bytes():
    for model_type, bpe in (("bpe", True), ("unigram", False)):
        old, _ = _fitted(model_type, 60)
        scores = normal_scores(old.model)
        normal = [
            i
            for i in range(old.vocab_size)
            if not (old.sp.is_control(i) or old.sp.is_unknown(i) or old.sp.is_unused(i))
        ]
        assert is_bpe(old.model) is bpe
        assert scores == pytest.approx([old.sp.get_score(i) for i in normal])
        assert normal_scores(appended(old, [("▁pudel", -3.5)]).model)[-1] == -3.5
