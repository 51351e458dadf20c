"""The training split as one epoch sees it: fixed, or re-drawn every epoch.

Two small-data regularizers change the training text from epoch to epoch:

- source noise (`train.source_lowercase`, `source_uppercase`, `source_unpunctuated`): a share
  of the source sentences is lowercased, capitalised or loses its final punctuation, so the
  model translates text as users type it; targets are untouched, so output stays cased;
- subword regularization (`tokenizer.sampling`): every sentence gets a sampled segmentation
  (BPE-dropout, Provilkov et al. 2020; unigram sampling, Kudo 2018).

Each epoch's text and segmentation are a function of (train.seed, epoch) only, so a resumed
run sees exactly what the uninterrupted run saw. Without either, the preprocessed ids are used.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from ..config import Config
from .batching import EncodedSplit, epoch_seed
from .preprocess import Prepared
from .tokenizers import SubwordTokenizer, Tokenizer

FINAL_PUNCTUATION = ".!?;:,"


def unpunctuated(line: str) -> str:
    """`line` without its final punctuation (and the spaces around it)."""
    return line.rstrip().rstrip(FINAL_PUNCTUATION).rstrip()


# How users type, applied to whole sentences: used by the noise below and by
# benchmarks/input_variants.py to score a model on each.
SOURCE_VARIANTS = {
    "as_given": lambda line: line,
    "lowercased": str.lower,
    "uppercased": str.upper,
    "unpunctuated": unpunctuated,
}


@dataclass(frozen=True)
class SourceNoise:
    """Shares of source sentences lowercased, capitalised, or stripped of final punctuation."""

    lowercase: float = 0.0
    uppercase: float = 0.0
    unpunctuated: float = 0.0

    @property
    def active(self) -> bool:
        return bool(self.lowercase or self.uppercase or self.unpunctuated)

    def apply(self, line: str, rng: random.Random) -> str:
        """`line` as a user might type it; one draw for case, one for punctuation."""
        case = rng.random()
        if case < self.lowercase:
            line = line.lower()
        elif case < self.lowercase + self.uppercase:
            line = line.upper()
        if rng.random() < self.unpunctuated:
            line = unpunctuated(line)
        return line


class TrainingEpochs:
    """`split(epoch)`: the training pairs encoded for that epoch."""

    def __init__(self, cfg: Config, prepared: Prepared):
        tc = cfg.train
        self.noise = SourceNoise(tc.source_lowercase, tc.source_uppercase, tc.source_unpunctuated)
        self.sampling, self.seed = cfg.tokenizer.sampling, tc.seed
        self.prepared, self.src_lang, self.tgt_lang = prepared, cfg.data.src_lang, cfg.data.tgt_lang
        self._fixed: EncodedSplit | None = None
        self._text: tuple[list[str], list[str]] | None = None
        self._last: tuple[int, EncodedSplit] | None = None  # the epoch asked for last, kept

    @property
    def varies(self) -> bool:
        """Whether epochs differ (else every epoch uses the preprocessed ids)."""
        return self.noise.active or self.sampling > 0

    def split(self, epoch: int) -> EncodedSplit:
        if not self.varies:
            if self._fixed is None:
                self._fixed = self.prepared.split("train")
            return self._fixed
        if self._last is None or self._last[0] != epoch:
            self._last = epoch, self._draw(epoch)
        return self._last[1]

    def _draw(self, epoch: int) -> EncodedSplit:
        if self._text is None:
            self._text = (self.prepared.text("train", self.src_lang),
                          self.prepared.text("train", self.tgt_lang))
        sources, targets = self._text
        seed = epoch_seed(self.seed, epoch)
        if self.noise.active:
            rng = random.Random(seed)
            sources = [self.noise.apply(line, rng) for line in sources]
        tokenizers = self.prepared.tokenizers
        return EncodedSplit.from_lists(self._encode(tokenizers.src, sources, seed),
                                       self._encode(tokenizers.tgt, targets, seed + 1))

    def _encode(self, tokenizer: Tokenizer, lines: list[str], seed: int) -> list[list[int]]:
        if self.sampling > 0 and isinstance(tokenizer, SubwordTokenizer):
            return tokenizer.encode_sampled(lines, self.sampling, seed)
        return tokenizer.encode_batch(lines)
