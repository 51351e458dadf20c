"""contracts/tokenizer.py: the Tokenizer interface (TOKENIZERS' entries: each kind, tfm's or a
plugin's, a subclass of it) and what it gives every kind: encode, one segmentation when it does
not sample, no vocabulary growth unless it says so, a refusal to be fitted when it comes with a
model; and SpecialIds, where a vocabulary keeps its special tokens."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import pytest

from transformer_cli.config import TokenizerConfig
from transformer_cli.contracts.tokenizer import SpecialIds, Tokenizer
from transformer_cli.errors import UsageError
from transformer_cli.seams import TOKENIZERS
from transformer_cli.tokenizers.subword import SubwordTokenizer
from transformer_cli.tokenizers.vocab import SPECIALS, TFM_IDS, Vocab


class Letters(Tokenizer):
    """Every character a token: the abstract methods only."""

    kind = "letters"

    def __init__(self, itos: Sequence[str]):
        self.vocab = Vocab(itos)
        self.ids, self.lowercase = self.vocab.ids, False

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    def encode_batch(self, lines, progress=None):
        return [self.vocab.lookup(list(line)) for line in lines]

    def decode(self, ids):
        return "".join(self.vocab.tokens(ids))

    def id_to_token(self, ids):
        return self.vocab.tokens(ids)

    def state(self) -> dict[str, Any]:
        return {"kind": self.kind, "itos": self.vocab.itos}

    @classmethod
    def from_state(cls, state):
        return cls(state["itos"])


def test_what_every_kind_inherits():
    tok = Letters([*SPECIALS, "a", "b"])
    assert tok.encode("ab") == tok.encode_batch(["ab"])[0] == [4, 5]
    assert not tok.samples and tok.encode_sampled(["ab", "ba"], alpha=0.5) == tok.encode_batch(["ab", "ba"])
    assert not tok.grows  # a plugin's vocabulary is not grown unless it says it can be
    tok.set_threads(4)  # no threads: nothing to set
    assert Letters.settings is None
    with pytest.raises(UsageError, match="a letters tokenizer is not fitted on a corpus"):
        Letters.fit(TokenizerConfig(), ("de", "en"), None)


def test_a_kind_is_a_subclass_of_the_interface_and_tfms_are():
    assert TOKENIZERS["sentencepiece"] is SubwordTokenizer and issubclass(SubwordTokenizer, Tokenizer)
    shape = TOKENIZERS.shape
    assert shape is not None and shape.fault(Letters) == ""
    assert "not a subclass of transformer_cli.contracts.tokenizer:Tokenizer" in shape.fault(Vocab)


def test_special_ids_are_four_fixed_ids():
    assert TFM_IDS == SpecialIds(unk=0, pad=1, sos=2, eos=3)
    with pytest.raises(dataclasses.FrozenInstanceError):
        TFM_IDS.pad = 5
