"""Per-batch augmentation of the training pairs: the same pair reads differently each epoch.

Two small-data regularizers change the training text from epoch to epoch:

- source noise (`train.transform_options.source_noise`: lowercase, uppercase, unpunctuated): a share
  of the source sentences is lowercased, capitalised or loses its final punctuation, so the
  model translates text as users type it; targets are untouched, so output stays cased;
- subword regularization (`tokenizer.sampling`): every sentence gets a sampled segmentation
  (BPE-dropout, Provilkov et al. 2020; unigram sampling, Kudo 2018).

The text changes are transforms (OpenNMT's idea): `train.transforms` lists them by name, in
order, from `TRANSFORMS` (seams.py), where a user's module or a package's `tfm.transforms`
entry point adds more (tests/data/test_augment.py adds one from outside); each is made from the config,
and one whose settings do nothing is left out.

Both are applied to one batch at a time, from the raw lines the prepared folder keeps beside
the ids, in the DataLoader's worker processes (data/loader.py): there is no whole-corpus
re-encoding at epoch starts. A batch's transforms draw from `batch_seed(train.seed, epoch,
batch)` only, so a resumed run, or one with another number of workers, sees exactly the
sources the uninterrupted run saw. Sampled segmentations cannot be made to repeat:
SentencePiece's sampler takes no per-call seed, so with `tokenizer.sampling` a resumed run is
the same run on other draws of the same distribution. Without either, the preprocessed ids
are used as they are.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..config import Config
from ..contracts.tokenizer import Tokenizer
from ..seams import TRANSFORMS, Transform  # train.transforms name -> config -> a Transform or None
from ..tokenizers.pair import TokenizerPair
from .augment_settings import SourceNoiseOptions
from .shards import TrainingSplit

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


@dataclass(frozen=True)
class NoisySources:
    """The source noise as a transform: targets keep theirs."""

    noise: SourceNoise
    changes_targets = False

    def __call__(self, source: str, target: str, rng: random.Random) -> tuple[str, str]:
        return self.noise.apply(source, rng), target


def source_noise(cfg: Config) -> Transform | None:
    """train.transforms' source_noise: its shares, train.transform_options.source_noise (None: all 0)."""
    own: SourceNoiseOptions = TRANSFORMS.options("source_noise", cfg.train.transform_options.get("source_noise"))
    noise = SourceNoise(own.lowercase, own.uppercase, own.unpunctuated)
    return NoisySources(noise) if noise.active else None


class Augmentation:
    """A batch's pairs as this epoch sees them: sources changed by the transforms, both sides
    with sampled segmentations, from the raw lines of the split. The transforms' draws in
    `pairs(split, indices, seed)` depend on nothing but its arguments; sampled segmentations
    do not repeat (see `SubwordTokenizer.encode_sampled`)."""

    def __init__(
        self,
        transforms: Sequence[Transform],
        sampling: float,
        tokenizers: TokenizerPair,
        names: Sequence[str] = (),
        only: Mapping[str, Sequence[str]] | None = None,
    ):
        """`names`: the transforms' train.transforms names; `only`: the sources (by the split's
        `source` names) that get only the transforms of these names (training/mix_plan.py)."""
        self.transforms, self.sampling, self.tokenizers = list(transforms), sampling, tokenizers
        chosen = {source: set(kept) for source, kept in (only or {}).items()}
        # per transform, the sources whose pairs it leaves alone
        skips = [frozenset(s for s, kept in chosen.items() if name not in kept) for name in names]
        self.skips = skips + [frozenset()] * (len(self.transforms) - len(skips))

    @classmethod
    def from_config(
        cls, cfg: Config, tokenizers: TokenizerPair, only: Mapping[str, Sequence[str]] | None = None
    ) -> Augmentation:
        made = [(name, TRANSFORMS[name](cfg)) for name in cfg.train.transforms]
        kept = [(name, t) for name, t in made if t is not None]
        return cls([t for _, t in kept], cfg.tokenizer.sampling, tokenizers, [name for name, _ in kept], only)

    @property
    def active(self) -> bool:
        """Whether epochs differ (else every epoch uses the preprocessed ids)."""
        return bool(self.transforms) or self.sampling > 0

    def pairs(
        self, split: TrainingSplit, indices: Sequence[int] | np.ndarray, seed: int
    ) -> list[tuple[list[int] | np.ndarray, list[int] | np.ndarray]]:
        """The ids of the pairs at `indices`, augmented with the draws of `seed`."""
        lines = [split.lines(int(i)) for i in indices]
        if self.transforms:
            rng = random.Random(seed)
            sources = [split.source(int(i)) for i in indices] if any(self.skips) else []
            for transform, skip in zip(self.transforms, self.skips):
                if skip:
                    lines = [(s, t) if o in skip else transform(s, t, rng) for o, (s, t) in zip(sources, lines)]
                else:
                    lines = [transform(s, t, rng) for s, t in lines]
        src_ids = self._encode(self.tokenizers.src, [src for src, _ in lines])
        tgt_ids: Sequence[list[int] | np.ndarray]
        if self.sampling > 0 or any(t.changes_targets for t in self.transforms):
            tgt_ids = self._encode(self.tokenizers.tgt, [tgt for _, tgt in lines])
        else:  # targets unchanged: their preprocessed ids stand
            tgt_ids = [split.pair(int(i))[1] for i in indices]
        return list(zip(src_ids, tgt_ids))

    def _encode(self, tokenizer: Tokenizer, lines: list[str]) -> list[list[int]]:
        if self.sampling > 0 and tokenizer.samples:
            return tokenizer.encode_sampled(lines, self.sampling)
        return tokenizer.encode_batch(lines)
