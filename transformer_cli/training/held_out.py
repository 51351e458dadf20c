"""The held-out share of a replay night's new pairs (train.retrain.held_out_share): pairs the
night does not train on, on which the promotion gate scores the candidate and the published
model it continued (training/promotion.py), so that a night is judged on the data it was
given as well as on validation: a night that learned its new pairs generalises to those it
did not see.

Which pairs: of the night's new pairs of the corpus and the corrections (real translations;
not the synthetic pairs, which a model wrote, nor the glossary's terms), each once however
many copies a source's weight makes, floor(share x new), at most `max_pairs`, those of the
smallest keys, a pair's key being the hash of its text's hash (training/replay.py) keyed with
the sha256 of the night's parent's seen set. So the same pairs are held out whatever the order
of the files and in every session of the night; fewer than MIN_PAIRS hold out none (a loss
over a handful of sentences says little).

A held-out pair is left out of every copy in every source the night trains on, and out of the
run's seen set: held out of that night only. The next night, continuing this night's model,
counts it new again and trains on it, unless its own draw, keyed with another seen set, holds
it out again (about `share` of the time); a night after one that was not promoted continues
the same model and holds out much the same pairs.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ..checkpoint import Checkpoint
from ..config import DecodeConfig
from ..corrections.training import PART as CORRECTIONS
from ..data.shards import ShardedSplit
from ..evaluate import loss_result, texts_nll
from ..inference.translate import TorchTranslator
from .mix_plan import REAL

ELIGIBLE = (REAL, CORRECTIONS)  # the sources whose new pairs may be held out
MIN_PAIRS = 10  # fewer held-out pairs than this: none


@dataclass(frozen=True)
class HeldOut:
    """A night's held-out pairs: their hashes [k] uint64, sorted, and their source and target
    lines, in that order; `new`: the new pairs of the eligible sources they were drawn from."""

    hashes: np.ndarray
    sources: list[str]
    targets: list[str]
    new: int
    share: float

    def __len__(self) -> int:
        return len(self.hashes)

    def record(self) -> dict[str, Any]:
        """As the night's checkpoints record it (Checkpoint.training's `held_out`)."""
        return {
            "pairs": len(self),
            "new_pairs": self.new,
            "share": self.share,
            "sha256": hashlib.sha256(self.hashes.tobytes()).hexdigest(),
        }

    def describe(self) -> str:
        """For the replay night's line in train.log."""
        new = f"{self.new:,} distinct new pair{'' if self.new == 1 else 's'} of the corpus and the corrections"
        if len(self):
            return f"{len(self):,} held out for the gate, not trained tonight ({self.share:g} of {new})"
        if not self.share:
            return "none held out for the gate (train.retrain.held_out_share: 0)"
        if not self.new:
            return "none held out for the gate (no new pair of the corpus or the corrections)"
        return f"none held out for the gate ({self.share:g} of {new} is fewer than {MIN_PAIRS})"


def _key(pair_hash: int, salt: bytes) -> int:
    """A pair's key: its hash hashed again, keyed with `salt`."""
    return int.from_bytes(hashlib.blake2b(pair_hash.to_bytes(8, "little"), digest_size=8, key=salt).digest(), "little")


def chosen(new: np.ndarray, salt: str, share: float, max_pairs: int) -> np.ndarray:
    """[k] uint64, sorted: the held-out hashes among `new` (hashes of new pairs, in any order,
    repeats counted once) under `salt` (the parent's seen set's sha256)."""
    unique = np.unique(np.asarray(new, dtype=np.uint64))
    count = min(max_pairs, math.floor(round(share * len(unique), 9)))
    if count < MIN_PAIRS:
        return np.zeros(0, dtype=np.uint64)
    key = bytes.fromhex(salt)
    keys = np.array([_key(int(h), key) for h in unique], dtype=np.uint64)
    return np.sort(unique[np.argsort(keys, kind="stable")[:count]])


def hold_out(
    splits: Mapping[str, ShardedSplit],
    hashes: Mapping[str, np.ndarray],
    parent: np.ndarray,
    salt: str,
    share: float,
    max_pairs: int,
) -> HeldOut:
    """The held-out pairs of a night whose sources are `splits` (by name; each pair's hash in
    `hashes`), against the parent's seen `parent` hashes keyed by its sha256 `salt`."""
    eligible = [name for name in splits if name in ELIGIBLE]
    new = [hashes[name][~np.isin(hashes[name], parent)] for name in eligible]
    unique = np.unique(np.concatenate(new or [np.zeros(0, dtype=np.uint64)]))
    held = chosen(unique, salt, share, max_pairs)
    lines: dict[int, tuple[str, str]] = {}
    for name in eligible:
        for i in np.flatnonzero(np.isin(hashes[name], held)):
            lines.setdefault(int(hashes[name][i]), splits[name].lines(int(i)))
    pairs = [lines[int(h)] for h in held]
    return HeldOut(held, [s for s, _ in pairs], [t for _, t in pairs], len(unique), share)


@dataclass(frozen=True)
class HeldOutScores:
    """Both models on the held-out pairs: summed NLL per target token of the published
    model's tokenization (each model encoding the text with its own tokenizers, so a grown
    vocabulary is compared in the same units), to 5 decimals as recorded."""

    pairs: int
    tokens: int
    candidate: float
    published: float

    def within(self, tolerance: float) -> bool:
        """Whether the candidate is above the published model by no more than `tolerance`."""
        return self.candidate - self.published <= tolerance

    def describe(self) -> str:
        """Both figures, for the decision line."""
        return (
            f"held-out new pairs ({self.pairs:,}): loss {self.candidate:.4f} against the published "
            f"model's {self.published:.4f}"
        )

    def refusal(self, tolerance: float) -> str:
        """The decision of a candidate that did not learn the new pairs."""
        return (
            f"kept published (it did not learn the new pairs: on the {self.pairs:,} held out, its loss "
            f"{self.candidate:.4f} is above the published model's {self.published:.4f} by more than {tolerance})"
        )

    def record(self) -> dict[str, Any]:
        """As promotions.log records it."""
        return {
            "pairs": self.pairs,
            "tokens": self.tokens,
            "candidate": self.candidate,
            "published": self.published,
        }


def score(
    held: HeldOut,
    candidate: Checkpoint,
    published: Checkpoint,
    device: torch.device,
    dtype: torch.dtype | None,
    check_stop: Callable[[], None] | None = None,
) -> HeldOutScores:
    """Both models' loss on the held-out pairs (teacher forcing)."""

    def nll(checkpoint: Checkpoint) -> tuple[float, int]:
        translator = TorchTranslator.load(checkpoint, device, DecodeConfig(), dtype)
        return texts_nll(translator, held.sources, held.targets, check_stop)

    (new, _), (old, tokens) = nll(candidate), nll(published)
    losses = (round(loss_result(nll, tokens).loss, 5) for nll in (new, old))
    return HeldOutScores(len(held), tokens, *losses)
