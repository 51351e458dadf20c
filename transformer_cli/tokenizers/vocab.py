"""Word vocabulary with the notebook's special tokens, for tokenizers that have no vocab; where
the vocabularies tfm builds keep their special tokens (`TFM_IDS`, a SpecialIds:
contracts/tokenizer.py).

The vocabularies tfm builds put the specials at ids 0-3 (`TFM_IDS`; SentencePiece is trained
to use the same ids), but nothing else relies on that: the model, the search, batching and
the loss take the ids from the tokenizer (`Tokenizer.ids`), so a vocabulary with another
layout (a pretrained model's) works as well.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..contracts.tokenizer import SpecialIds

# The layout of the vocabularies tfm builds (word vocabularies, SentencePiece models).
UNK, PAD, SOS, EOS = 0, 1, 2, 3
SPECIALS = ("<unk>", "<pad>", "<sos>", "<eos>")
TFM_IDS = SpecialIds(unk=UNK, pad=PAD, sos=SOS, eos=EOS)


@dataclass(frozen=True)
class Framing:
    """The special ids a pair of sequences is framed with (batching): the source
    vocabulary's and the target's (`TokenizerPair.framing`)."""

    src: SpecialIds
    tgt: SpecialIds


class Vocab:
    """Maps tokens to ids and back; unknown tokens map to `<unk>`. The specials may be
    anywhere (`ids` says where); the vocabularies tfm builds put them first."""

    def __init__(self, itos: Sequence[str]):
        self.itos = list(itos)
        self.stoi = {tok: i for i, tok in enumerate(self.itos)}
        missing = [t for t in SPECIALS if t not in self.stoi]
        if missing:
            raise ValueError(f"a vocab must hold the special tokens {SPECIALS} (missing: {missing})")
        self.ids = SpecialIds(*(self.stoi[token] for token in SPECIALS))

    @classmethod
    def build(cls, sentences: Iterable[Sequence[str]], min_freq: int = 1, max_size: int | None = None) -> Vocab:
        return cls.from_counts(Counter(tok for sent in sentences for tok in sent), min_freq, max_size)

    @classmethod
    def from_counts(
        cls, counts: Counter[str], min_freq: int = 1, max_size: int | None = None, reserved: Sequence[str] = ()
    ) -> Vocab:
        """Tokens seen at least `min_freq` times, most frequent first (ties alphabetical),
        after the specials and the `reserved` tokens.

        `max_size` caps the total size, specials and reserved tokens included.
        """
        fixed = [*SPECIALS, *(t for t in reserved if t not in SPECIALS)]
        kept = sorted((t for t, c in counts.items() if c >= min_freq and t not in fixed), key=lambda t: (-counts[t], t))
        if max_size is not None:
            kept = kept[: max(0, max_size - len(fixed))]
        return cls([*fixed, *kept])

    def __len__(self) -> int:
        return len(self.itos)

    def lookup(self, tokens: Iterable[str]) -> list[int]:
        get, unk = self.stoi.get, self.ids.unk
        return [get(t, unk) for t in tokens]

    def tokens(self, ids: Iterable[int]) -> list[str]:
        return [self.itos[i] if 0 <= i < len(self.itos) else SPECIALS[UNK] for i in ids]
