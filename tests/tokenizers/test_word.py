"""tokenizers/word.py: WordTokenizer, spaCy's words and a vocabulary: natural text round
trips (its detokenization learned from the training text's spacing), lowercasing and unknown
words, counts that add up chunk by chunk, and its state."""

from __future__ import annotations

import pytest
from helpers import fit_tokenizers, sentence_pairs

from transformer_cli.config import TokenizerConfig
from transformer_cli.errors import UsageError
from transformer_cli.tokenizers.vocab import EOS, PAD, SOS, UNK
from transformer_cli.tokenizers.word import WordCounts, WordTokenizer

ENGLISH = [
    "A man in a blue shirt (left) is standing on a ladder.",
    "Two dogs play in the snow, don't they?",
    "The girl's kite is red.",
    "A man on a four-wheeler rides through the mud.",
] * 3


def _words(lang, lines, cfg):
    """A word tokenizer fitted on `lines` (as the source side of a pair)."""
    return fit_tokenizers(cfg, lang, lang, lines, lines).src


def test_word_tokenizer_round_trips_natural_text():
    cfg = TokenizerConfig(kind="spacy", min_freq=1)
    tok = _words("en", ENGLISH, cfg)
    ids = tok.encode_batch(ENGLISH)
    assert [tok.decode(i) for i in ids] == ENGLISH
    assert tok.decode([SOS, *ids[0], EOS, PAD, PAD]) == ENGLISH[0]
    assert tok.decode([*ids[2], EOS, *ids[1]]) == ENGLISH[2]  # stops at <eos>


def test_word_tokenizer_lowercase_and_unknown_words():
    tok = _words("en", ENGLISH, TokenizerConfig(kind="spacy", lowercase=True, min_freq=1))
    ids = tok.encode("A ZEBRA is red.")
    assert UNK in ids and tok.decode(ids) == "a <unk> is red."


def test_word_tokenizer_state_round_trip():
    lines = [p[0] for p in sentence_pairs(50)]
    tok = _words("de", lines, TokenizerConfig(kind="spacy"))
    again = WordTokenizer.from_state(tok.state())
    line = lines[0]
    assert again.encode(line) == tok.encode(line) and again.decode(tok.encode(line)) == line


def test_counts_of_parts_add_up_to_the_counts_of_the_whole():
    blank = WordTokenizer.blank("en", lowercase=False)
    whole = blank.count(ENGLISH)
    parts = WordCounts.empty()
    for i in range(0, len(ENGLISH), 5):
        parts.add(blank.count(ENGLISH[i : i + 5]))
    assert parts == whole and (whole.tokens["a"], whole.tokens["A"], whole.tokens["."]) == (9, 6, 9)
    assert whole.gaps[("mud", ".", False)] == 3 and whole.gaps[("(", "left", False)] == 3
    cfg = TokenizerConfig(kind="spacy", min_freq=1)
    tok = WordTokenizer.from_counts("en", whole, cfg)
    assert {".", "?", ",", "'s", ")"} <= tok.attach_left and "(" in tok.attach_right and "a" not in tok.attach_left


def test_the_vocabulary_keeps_what_min_freq_and_max_vocab_allow():
    counts = WordTokenizer.blank("en", lowercase=False).count(ENGLISH[:4] * 2 + ["rare words once"])
    frequent = WordTokenizer.from_counts("en", counts, TokenizerConfig(kind="spacy", min_freq=2))
    assert "rare" not in frequent.vocab.stoi and "ladder" in frequent.vocab.stoi
    assert frequent.encode("rare kite")[0] == frequent.ids.unk
    capped = WordTokenizer.from_counts("en", counts, TokenizerConfig(kind="spacy", min_freq=1, max_vocab=10))
    assert capped.vocab_size == 10 and capped.id_to_token([4]) == ["."]  # the most frequent first


def test_a_language_spacy_has_no_tokenizer_for_is_one_line():
    with pytest.raises(UsageError, match="spaCy has no tokenizer for language 'xx-nope'"):
        WordTokenizer.blank("xx-nope", lowercase=False).encode("a b")
