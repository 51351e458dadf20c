"""The noise of noised back-translation (Edunov et al. 2018, §3): each word of a beam-search
translation is dropped with probability 0.1 or replaced by a filler token with probability
0.1, and the words are shuffled locally, none moving more than three positions. The draws of a
line depend on the seed and the line alone, so a line is noised the same way wherever it
falls in a chunk."""

from __future__ import annotations

import random

from ..tokenizers.text_marks import FILLER

DROP = 0.1
BLANK = 0.1
MAX_SHIFT = 3


def noised(line: str, seed: int) -> str:
    """`line` (words separated by spaces) with dropped, blanked and locally shuffled words."""
    rng = random.Random(f"{seed}:{line}")
    kept = [w for w in line.split() if rng.random() >= DROP]
    words = [FILLER if rng.random() < BLANK else w for w in kept]
    # Each word's position moves by a uniform draw in [0, MAX_SHIFT + 1) and the words are
    # sorted by it: a word can only be overtaken by words at most MAX_SHIFT positions behind.
    keys = [i + rng.uniform(0, MAX_SHIFT + 1) for i in range(len(words))]
    return " ".join(w for _, w in sorted(zip(keys, words), key=lambda kw: kw[0]))
