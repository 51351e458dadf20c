"""A replay night (train.retrain.night: replay): a continued run trains on the pairs the
published model's data did not hold, each pass beside a fresh sample of the pairs it held
(mixed fine-tuning with replay: Chu et al. 2017), so its cost follows what changed.

What a model's data held is its seen set: the sorted 64-bit hashes of every training pair
(source and target text, as the prepared folder keeps them) of every source of its mix
(training/mix_plan.py), written by each run under `seen/<sha256>.u64` in its run folder and
named by its checkpoints (`training.seen_sha256`). A night hashes its own pairs (a few
seconds per million) and calls new each pair whose hash its parent's set lacks: lines
appended to the corpus or a part, lines of a replaced file that were not there before, new
synthetic lines, new corrections; a line deleted simply drops out. A parent without a seen set
(a model of an earlier tfm, or of a run without night: replay) makes the night train every pair,
as train.retrain's epochs say, and train.log says why.

A share of the new pairs is held out of the night, every copy of them, and out of its seen set,
for the promotion gate (train.retrain.held_out_share: training/held_out.py).

Each pass (epoch) of a night holds every copy of every new pair (a source's weight repeats
them) and round(new x replay_ratio) pairs drawn without replacement from the held ones, by
(train.seed, epoch): a resumed night draws the same. Seen files are kept for the run's parent
and the `KEEP` newest others (a rollback to an older published model finds none: its next
night trains every pair, and says so).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..config_retrain import RetrainConfig
from ..data.batching import epoch_seed
from ..data.loader import TrainingData
from ..data.mixed import MixedSplit
from ..data.shards import ShardedSplit, TrainingSplit
from ..fsutil import atomic_write
from .held_out import HeldOut, hold_out

KEEP = 8  # seen files kept besides the run's parent's
SEEN = "seen"  # the run folder's folder of seen sets
log = logging.getLogger("tfm")


def split_hashes(split: ShardedSplit) -> np.ndarray:
    """[pairs] uint64: each pair's hash, from its source and target line."""
    out = np.empty(len(split), dtype=np.uint64)
    for i, (src, tgt) in enumerate(split.iter_lines()):
        digest = hashlib.blake2b(src, digest_size=8)
        digest.update(b"\0")
        digest.update(tgt)
        out[i] = int.from_bytes(digest.digest(), "little")
    return out


@dataclass(frozen=True)
class Part:
    """One stretch of a training split's index space: `copies` copies of a split's pairs, one
    after the other, starting at `start`."""

    name: str
    split: ShardedSplit
    start: int
    copies: int


def parts_of(split: TrainingSplit) -> list[Part]:
    """The stretches of `split`'s index space (a MixedSplit's sources, or the split alone)."""
    if isinstance(split, MixedSplit):
        return [Part(s.name, s.split, int(split.starts[k]), s.copies) for k, s in enumerate(split.sources)]
    if isinstance(split, ShardedSplit):
        return [Part("train", split, 0, 1)]
    raise TypeError(f"a replay night needs a prepared split, not {type(split).__name__}")


@dataclass(frozen=True)
class Seen:
    """A seen set: its sorted unique hashes and their sha256 (the file's name)."""

    hashes: np.ndarray
    sha256: str

    @classmethod
    def of(cls, hashes: Iterable[np.ndarray], leaving_out: np.ndarray | None = None) -> Seen:
        """The set of `hashes` (arrays of uint64), but those in `leaving_out`."""
        unique = np.unique(np.concatenate([np.asarray(h, dtype=np.uint64) for h in hashes] or [np.zeros(0, np.uint64)]))
        if leaving_out is not None:
            unique = unique[~np.isin(unique, leaving_out)]
        return cls(unique, hashlib.sha256(unique.tobytes()).hexdigest())

    def write(self, folder: Path) -> Path:
        """Into `folder` (seen/ of a run folder), unless it is there."""
        path = folder / f"{self.sha256}.u64"
        if not path.is_file():
            folder.mkdir(parents=True, exist_ok=True)
            atomic_write(path, lambda f: f.write(self.hashes.tobytes()))
        return path

    @classmethod
    def read(cls, folder: Path, sha256: str) -> Seen | None:
        """The set of that sha256 in `folder` (None: not there, or not whole)."""
        try:
            hashes = np.fromfile(folder / f"{sha256}.u64", dtype=np.uint64)
        except (OSError, ValueError):
            return None
        return cls(hashes, sha256) if hashlib.sha256(hashes.tobytes()).hexdigest() == sha256 else None


def prune(folder: Path, keep: set[str]) -> None:
    """Remove the seen files of `folder` but those named in `keep` and the KEEP newest."""
    files = sorted(folder.glob("*.u64"), key=lambda p: p.stat().st_mtime_ns, reverse=True)
    for path in files[KEEP:]:
        if path.stem not in keep:
            path.unlink(missing_ok=True)


@dataclass(frozen=True)
class Night:
    """Which pairs of the training split a replay night trains on (see the module docstring):
    `new` [every copy of each new pair] and `held` [every copy of each pair the parent's data
    held], int64 indices into the split."""

    new: np.ndarray
    held: np.ndarray
    ratio: float
    new_pairs: dict[str, int]  # by source, each pair once

    @property
    def replayed(self) -> int:
        """Held pairs drawn for each pass."""
        return min(len(self.held), round(len(self.new) * self.ratio))

    def epoch_indices(self, seed: int, epoch: int) -> np.ndarray:
        """The pairs of pass `epoch`: the new ones, then a sample of the held ones."""
        rng = np.random.default_rng(epoch_seed(seed, epoch))
        drawn = np.sort(rng.choice(len(self.held), self.replayed, replace=False))
        return np.concatenate([self.new, self.held[drawn]])

    def describe(self) -> str:
        by_source = ", ".join(f"{name} {n:,}" for name, n in self.new_pairs.items() if n)
        return (
            f"{sum(self.new_pairs.values()):,} new pairs ({by_source or 'none'}; {len(self.new):,} a pass with "
            f"their weights), {self.replayed:,} of the {len(self.held):,} the published model's data held "
            "replayed in each pass"
        )


def night_of(
    parts: list[Part], hashes: dict[str, np.ndarray], parent: Seen, ratio: float, kept_out: np.ndarray | None = None
) -> Night:
    """The new and held pairs of `parts` (each source's pair `hashes`) against `parent`'s set;
    a pair whose hash is in `kept_out` (the held-out new pairs) is neither, in every copy."""
    new, held, counts = [], [], {}
    for part in parts:
        fresh = ~np.isin(hashes[part.name], parent.hashes, assume_unique=False)
        counts[part.name] = int(fresh.sum())
        trained = fresh & ~np.isin(hashes[part.name], kept_out) if kept_out is not None else fresh
        n = len(part.split)
        for copy in range(part.copies):
            base = part.start + copy * n
            new.append(base + np.flatnonzero(trained))
            held.append(base + np.flatnonzero(~fresh))
    empty = np.zeros(0, dtype=np.int64)
    return Night(np.concatenate(new or [empty]), np.concatenate(held or [empty]), ratio, counts)


def seen_of(checkpoint_path: Path, training: object) -> Seen | None:
    """The seen set the checkpoint at `checkpoint_path` names (its training record's
    seen_sha256), from the seen/ folder beside it (None: it names none, or it is gone)."""
    sha = training.get("seen_sha256") if isinstance(training, dict) else None
    return Seen.read(checkpoint_path.parent / SEEN, sha) if isinstance(sha, str) else None


def start_night(
    data: TrainingData, run_folder: Path, parent: Seen | None, rules: RetrainConfig, main: bool
) -> tuple[Seen, HeldOut | None]:
    """Hash the pairs of `data`'s split and keep them as the run's seen set (the first rank
    writes it into the run folder); with the `parent`'s set, hold out a share of the new pairs
    and let `data` draw each epoch from the rest of the night's pairs, which one line of
    train.log describes. Returns the run's set (without the held-out pairs) and the held-out
    pairs (None: no parent's set, a night of every pair)."""
    parts = parts_of(data.split)
    hashes = {p.name: split_hashes(p.split) for p in parts}
    held_out = None
    if parent is not None:
        splits = {p.name: p.split for p in parts}
        held_out = hold_out(
            splits, hashes, parent.hashes, parent.sha256, rules.held_out_share, rules.held_out_max_pairs
        )
        night = night_of(parts, hashes, parent, rules.replay_ratio, held_out.hashes)
        data.selection = night.epoch_indices
        if main:
            passes, steps = data.cfg.train.epochs, data.steps(0)
            log.info(
                "replay night: %s; %s; %s of %s",
                night.describe(),
                held_out.describe(),
                _count(passes, "pass"),
                _count(steps, "step"),
            )
    own = Seen.of(hashes.values(), leaving_out=None if held_out is None else held_out.hashes)
    if main:
        folder = run_folder / SEEN
        own.write(folder)
        prune(folder, {own.sha256, parent.sha256 if parent else ""})
    return own, held_out


def _count(n: int, what: str) -> str:
    return f"{n} {what}" if n == 1 else f"{n} {what}{'es' if what.endswith('s') else 's'}"
