"""Word vocabulary with the notebook's special tokens, for tokenizers that have no vocab.

Ids 0-3 are the specials in every tokenizer of tfm (SentencePiece is trained to use the
same ids), so the model and the search code can rely on them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

UNK, PAD, SOS, EOS = 0, 1, 2, 3
SPECIALS = ("<unk>", "<pad>", "<sos>", "<eos>")


class Vocab:
    """Maps tokens to ids and back; unknown tokens map to `<unk>`."""

    def __init__(self, itos: Sequence[str]):
        if tuple(itos[: len(SPECIALS)]) != SPECIALS:
            raise ValueError(f"a vocab must start with {SPECIALS}")
        self.itos = list(itos)
        self.stoi = {tok: i for i, tok in enumerate(self.itos)}

    @classmethod
    def build(cls, sentences: Iterable[Sequence[str]], min_freq: int = 1,
              max_size: int | None = None) -> Vocab:
        return cls.from_counts(Counter(tok for sent in sentences for tok in sent), min_freq, max_size)

    @classmethod
    def from_counts(cls, counts: Counter[str], min_freq: int = 1, max_size: int | None = None) -> Vocab:
        """Tokens seen at least `min_freq` times, most frequent first (ties alphabetical).

        `max_size` caps the total size, specials included.
        """
        kept = sorted((t for t, c in counts.items() if c >= min_freq and t not in SPECIALS),
                      key=lambda t: (-counts[t], t))
        if max_size is not None:
            kept = kept[: max(0, max_size - len(SPECIALS))]
        return cls([*SPECIALS, *kept])

    def __len__(self) -> int:
        return len(self.itos)

    def lookup(self, tokens: Iterable[str]) -> list[int]:
        get = self.stoi.get
        return [get(t, UNK) for t in tokens]

    def tokens(self, ids: Iterable[int]) -> list[str]:
        return [self.itos[i] if 0 <= i < len(self.itos) else SPECIALS[UNK] for i in ids]
