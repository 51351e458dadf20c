"""tokenizers/vocab.py: Vocab (the specials first, then by frequency, ties alphabetical, capped;
lookups of unknown tokens give `<unk>`) and SpecialIds, where a vocabulary keeps its specials
(tfm's at 0-3, another's anywhere)."""

from __future__ import annotations

from collections import Counter

import pytest

from transformer_cli.contracts.tokenizer import SpecialIds
from transformer_cli.tokenizers.vocab import EOS, PAD, SOS, SPECIALS, TFM_IDS, UNK, Framing, Vocab


def test_vocab_specials_min_freq_order_and_cap():
    sents = [["b", "a", "a"], ["c", "a", "b"], ["d"]]
    v = Vocab.build(sents, min_freq=2)
    assert v.itos == [*SPECIALS, "a", "b"]  # by frequency, "c"/"d" below min_freq
    assert (v.stoi["<unk>"], v.stoi["<pad>"], v.stoi["<sos>"], v.stoi["<eos>"]) == (UNK, PAD, SOS, EOS)
    assert v.lookup(["a", "zzz"]) == [4, UNK]
    assert Vocab.build([["x", "y"], ["y", "x"]]).itos[4:] == ["x", "y"]  # ties alphabetical
    assert len(Vocab.build(sents, max_size=5)) == 5


def test_a_vocabulary_may_keep_its_specials_anywhere_but_must_hold_them():
    v = Vocab(["a", "<eos>", "b", "<unk>", "<sos>", "<pad>"])
    assert v.ids == SpecialIds(unk=3, pad=5, sos=4, eos=1) != TFM_IDS
    assert v.lookup(["b", "zzz"]) == [2, 3]  # unknown: this vocabulary's <unk>
    assert v.tokens([0, 99, -1]) == ["a", "<unk>", "<unk>"]
    with pytest.raises(ValueError, match=r"missing: \['<sos>', '<eos>'\]"):
        Vocab(["<unk>", "<pad>", "a"])
    assert TFM_IDS == SpecialIds(UNK, PAD, SOS, EOS) == Vocab(SPECIALS).ids
    assert Framing(v.ids, TFM_IDS).src.pad == 5


def test_counts_below_min_freq_are_left_out_and_specials_are_never_counted_twice():
    counts = Counter({"<unk>": 9, "x": 3, "y": 1})
    v = Vocab.from_counts(counts, min_freq=2)
    assert v.itos == [*SPECIALS, "x"]
    assert Vocab.from_counts(counts, max_size=3).itos == list(SPECIALS)  # the cap counts the specials
