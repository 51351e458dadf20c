"""tokenizers/pair.py: TokenizerPair, the two sides a model translates with (one shared
vocabulary or two), saved as files and as a state, its vocabularies' digest (the truecaser
left out), and the sources as a model is given them (recased, tfm's training marks removed)."""

from __future__ import annotations

import dataclasses

import pytest
from helpers import fit_tokenizers, sentence_pairs

from transformer_cli.config import TokenizerConfig
from transformer_cli.tokenizers.pair import LinesText, TokenizerPair, vocabulary_digest
from transformer_cli.tokenizers.text_marks import BACK_TRANSLATION_TAG, FILLER, tagged
from transformer_cli.tokenizers.truecase import Truecaser


def test_joint_and_separate_pairs(tmp_path):
    pairs = sentence_pairs(200)
    de, en = [p[0] for p in pairs], [p[1] for p in pairs]
    joint = fit_tokenizers(TokenizerConfig(vocab_size=100, joint=True), "de", "en", de, en)
    assert joint.joint and joint.src is joint.tgt
    split = fit_tokenizers(TokenizerConfig(vocab_size=60, joint=False), "de", "en", de, en)
    assert not split.joint and split.src is not split.tgt
    for pair in (joint, split):
        pair.save(tmp_path)
        for again in (TokenizerPair.load(tmp_path), TokenizerPair.from_state(pair.state())):
            assert again.joint == pair.joint
            assert again.tgt.decode(again.tgt.encode(en[0])) == en[0]
            assert again.src.encode(de[1]) == pair.src.encode(de[1])


@pytest.fixture(scope="module")
def joint():
    pairs = sentence_pairs(200)
    return fit_tokenizers(TokenizerConfig(vocab_size=80), "de", "en", [p[0] for p in pairs], [p[1] for p in pairs])


def test_the_digest_names_the_vocabularies_not_the_truecaser(joint):
    recased = dataclasses.replace(joint, recaser=Truecaser.fit(["Ein Mann sieht Berlin."]))
    assert recased.vocabulary_digest() == joint.vocabulary_digest() == vocabulary_digest(joint.state())
    assert "source_truecaser" in recased.state() and "source_truecaser" not in joint.state()
    pairs = sentence_pairs(200, seed=1)
    other = fit_tokenizers(TokenizerConfig(vocab_size=81), "de", "en", [p[0] for p in pairs], [p[1] for p in pairs])
    assert other.vocabulary_digest() != joint.vocabulary_digest()


def test_two_equal_vocabularies_are_the_same_vocabulary(joint):
    assert joint.same_vocabulary() and joint.framing.src == joint.framing.tgt == joint.src.ids
    twice = TokenizerPair(joint.src, type(joint.src).from_state(joint.src.state()))
    assert not twice.joint and twice.same_vocabulary()
    pairs = sentence_pairs(100)
    split = fit_tokenizers(
        TokenizerConfig(vocab_size=60, joint=False), "de", "en", [p[0] for p in pairs], [p[1] for p in pairs]
    )
    assert not split.same_vocabulary()


def test_sources_are_recased_on_request_and_lose_tfms_marks(joint):
    recaser = Truecaser.fit([de for de, _ in sentence_pairs(200)])
    pair = dataclasses.replace(joint, recaser=recaser)
    line = "ein mann sieht einen ball."
    assert pair.recase_sources([line]) == ["Ein mann sieht einen ball."]
    assert pair.encode_sources([line], recase=True) == pair.src.encode_batch(["Ein mann sieht einen ball."])
    assert pair.encode_sources([line], recase=False) == pair.src.encode_batch([line])
    marked = tagged(BACK_TRANSLATION_TAG, f"Ein {FILLER} mann.")
    assert pair.encode_sources([marked], recase=False) == pair.src.encode_batch(["Ein  mann."])


def test_a_malformed_state_is_a_value_error(joint):
    for state in ({}, {"joint": True}, {"joint": True, "shared": {"kind": "nope"}}, {**joint.state(), "joint": False}):
        with pytest.raises(ValueError, match="malformed tokenizer state"):
            TokenizerPair.from_state(state)


def test_lines_in_memory_are_training_text():
    text = LinesText(["a", "b", "c"], ["x", "y", "z"], workers=2)
    assert text.sample(5) == (["a", "b", "c"], ["x", "y", "z"])
    assert len(text.sample(2)[0]) == 2
    seen = []
    assert list(text.map(lambda chunk: len(chunk[0]), seen.append, ("set up",))) == [3] and seen == ["set up"]
