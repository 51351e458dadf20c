"""tokenizers/subword.py: SubwordTokenizer, SentencePiece BPE or unigram with tfm's special
ids: exact round trips, a vocabulary too large named by its key, sampled segmentations that
still decode to the line, one model or two (tokenizer.joint), and its state."""

from __future__ import annotations

import pytest
from helpers import sentence_pairs

from transformer_cli.config import TokenizerConfig
from transformer_cli.errors import UsageError
from transformer_cli.tokenizers.pair import LinesText
from transformer_cli.tokenizers.subword import SubwordTokenizer
from transformer_cli.tokenizers.vocab import EOS, PAD, SOS, SPECIALS, TFM_IDS, UNK

ENGLISH = [
    "A man in a blue shirt (left) is standing on a ladder.",
    "Two dogs play in the snow, don't they?",
    "The girl's kite is red.",
    "A man on a four-wheeler rides through the mud.",
] * 3


@pytest.mark.parametrize("model_type", ["bpe", "unigram"])
def test_sentencepiece_round_trips_exactly(model_type):
    lines = [p[1] for p in sentence_pairs(300)] + ENGLISH
    cfg = TokenizerConfig(kind="sentencepiece", model_type=model_type, vocab_size=60)
    tok = SubwordTokenizer.train(lines, cfg, threads=1)
    assert tok.vocab_size == 60
    ids = tok.encode_batch(lines)
    assert [tok.decode(i) for i in ids] == lines  # cased, spacing restored
    assert tok.id_to_token([UNK, PAD, SOS, EOS]) == list(SPECIALS)


def test_sentencepiece_vocab_too_large_names_the_key():
    with pytest.raises(UsageError, match=r"tokenizer.vocab_size=5000 is too large.*at most \d+"):
        SubwordTokenizer.train(ENGLISH, TokenizerConfig(vocab_size=5000), threads=1)


def test_sampled_segmentations_differ_and_decode_to_the_line():
    lines = [p[1] for p in sentence_pairs(300)]
    tok = SubwordTokenizer.train(lines, TokenizerConfig(model_type="bpe", vocab_size=80), threads=1)
    assert tok.samples and tok.grows and tok.ids == TFM_IDS
    plain = tok.encode_batch(lines[:20])
    draws = [tok.encode_sampled(lines[:20], alpha=0.3) for _ in range(3)]
    assert any(draw != plain for draw in draws)  # other segmentations...
    assert all([tok.decode(ids) for ids in draw] == lines[:20] for draw in draws)  # ...of the same text


def test_fitting_makes_one_model_or_two_and_the_state_rebuilds_it():
    pairs = sentence_pairs(200)
    text = LinesText([de for de, _ in pairs], [en for _, en in pairs])
    src, tgt = SubwordTokenizer.fit(TokenizerConfig(vocab_size=70, joint=True), ("de", "en"), text)
    assert src is tgt
    src, tgt = SubwordTokenizer.fit(TokenizerConfig(vocab_size=70, joint=False, lowercase=True), ("de", "en"), text)
    assert src is not tgt and src.lowercase
    assert not any(c.isupper() for piece in src.id_to_token(range(4, src.vocab_size)) for c in piece)
    again = SubwordTokenizer.from_state(src.state())
    assert again.state() == src.state() and again.encode(pairs[0][0]) == src.encode(pairs[0][0])
    assert src.decode(src.encode("Ein Mann.")) == "ein mann."  # lowercased before encoding
