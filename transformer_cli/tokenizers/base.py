"""What every tokenizer kind shares (the interface itself, `Tokenizer`, is
contracts/tokenizer.py's): fitting's seeded sample of a corpus, special ids stripped from an
output, and a saved tokenizer state rebuilt by its kind (`TOKENIZERS`).

The kinds are one module each: tokenizers/word.py (spaCy words + a vocabulary),
tokenizers/subword.py (SentencePiece), tokenizers/piece_vocab.py (SentencePiece
pieces looked up in a separate vocabulary, as Marian models keep them). tokenizers/pair.py
holds the pair a model translates with.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from ..contracts.tokenizer import Chunk, SpecialIds, Tokenizer
from ..seams import TOKENIZERS

SAMPLE_SEED = 0  # the sample a tokenizer is fitted on is the same on every run


def sample_pairs(chunks: Iterator[Chunk], size: int, check_stop: Callable[[], None] | None = None) -> Chunk:
    """A seeded uniform sample of at most `size` pairs (all of them, in order, when there are
    no more): reservoir sampling, so memory holds the sample only."""
    rng = random.Random(SAMPLE_SEED)
    sources: list[str] = []
    targets: list[str] = []
    seen = 0
    for chunk in chunks:
        if check_stop is not None:
            check_stop()
        for a, b in zip(*chunk):
            if seen < size:
                sources.append(a)
                targets.append(b)
            else:
                j = rng.randrange(seen + 1)
                if j < size:
                    sources[j], targets[j] = a, b
            seen += 1
    return sources, targets


def strip_specials(ids: Sequence[int], specials: SpecialIds) -> list[int]:
    """Ids up to the first `<eos>`, without `<sos>` and `<pad>`."""
    out = []
    skipped = (specials.sos, specials.pad)
    for i in ids:
        if i == specials.eos:
            break
        if i not in skipped:
            out.append(int(i))
    return out


def tokenizer_from_state(state: dict[str, Any]) -> Tokenizer:
    """Rebuild a tokenizer from its `state()` (by its kind; an unknown one is a ValueError)."""
    kind = TOKENIZERS.find(state["kind"])
    if kind is None:
        raise ValueError(f"unknown tokenizer kind {state['kind']!r} (known: {', '.join(TOKENIZERS.names())})")
    return kind.from_state(state)
