import pytest
from helpers import sentence_pairs

from transformer_cli.config import TokenizerConfig
from transformer_cli.errors import UsageError
from transformer_cli.tokenizers.pair import TokenizerPair, fit_tokenizers
from transformer_cli.tokenizers.subword import SubwordTokenizer
from transformer_cli.tokenizers.vocab import EOS, PAD, SOS, SPECIALS, UNK, Vocab
from transformer_cli.tokenizers.word import WordTokenizer

ENGLISH = [
    "A man in a blue shirt (left) is standing on a ladder.",
    "Two dogs play in the snow, don't they?",
    "The girl's kite is red.",
    "A man on a four-wheeler rides through the mud.",
] * 3


def _words(lang, lines, cfg):
    """A word tokenizer fitted on `lines` (as the source side of a pair)."""
    return fit_tokenizers(cfg, lang, lang, lines, lines).src


def test_vocab_specials_min_freq_order_and_cap():
    sents = [["b", "a", "a"], ["c", "a", "b"], ["d"]]
    v = Vocab.build(sents, min_freq=2)
    assert v.itos == [*SPECIALS, "a", "b"]  # by frequency, "c"/"d" below min_freq
    assert (v.stoi["<unk>"], v.stoi["<pad>"], v.stoi["<sos>"], v.stoi["<eos>"]) == (UNK, PAD, SOS, EOS)
    assert v.lookup(["a", "zzz"]) == [4, UNK]
    assert Vocab.build([["x", "y"], ["y", "x"]]).itos[4:] == ["x", "y"]  # ties alphabetical
    assert len(Vocab.build(sents, max_size=5)) == 5


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
