"""Translations across versions of a model: what a night does when the model at a configured
path was replaced (a teacher named by `published.pt` changes at every promotion; a reverse
model is retrained).

A translation cache belongs to one version (its models' digests: synthetic/cache.py). A
lineage is the models a Direction names by path, with its search: its file,
`<synthetic.cache_dir>/lineages/<kind>-<digest>.json`, lists the versions that translated
into a cache, oldest first, each with its cache folder and its models' validation BLEU.

`synthetic.republished` chooses what a new version does with the lines earlier ones translated:

    keep         their earlier translations stay (read from the newest cache that has them),
                 but for one share of them per version (`refresh_share`: the lines whose key
                 falls in that version's bucket), which the new version translates again; the
                 new lines are translated by the new version. When the new version improved on
                 validation by `republished_margin` BLEU over the one before, every line is
                 translated again.
    retranslate  every line is translated again by the new version.

One line in the log says which, like train.retrain's, on a run that has such lines to translate.

What a night reads is bounded: with `keep` and a refresh_share above 0, round(1 / share)
versions in a row refresh every bucket once, so a line the text still holds has its newest
translation among that many versions before this one. Only their caches are opened (20 with
the default 0.05), however long the lineage: an older cache is never read again (it is not
deleted: another config's lineage may share it).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..config import Config
from ..errors import TfmError
from ..fsutil import atomic_write_json, exclusive_lock
from ..inference.translate import TranslationBackend
from .cache import TranslationCache
from .directions import Direction

log = logging.getLogger("tfm")
BLOCK = 65536  # keys looked up at a time


@dataclass(frozen=True)
class Version:
    """One version of a lineage: its cache folder (a name in the cache root), its models'
    digests and their validation BLEU (None where a model records none)."""

    cache: str
    models: list[str]
    valid_bleu: list[float | None]

    def bleu(self) -> float | None:
        """The models' mean validation BLEU, when every one records it."""
        if not self.valid_bleu or any(b is None for b in self.valid_bleu):
            return None
        return sum(b for b in self.valid_bleu if b is not None) / len(self.valid_bleu)


@dataclass
class Plan:
    """What this version translates of a text: `pending` rows (new ones and the refreshed
    share), and the earlier versions' caches the rest is read from (newest first)."""

    pending: np.ndarray  # [lines] bool
    earlier: list[TranslationCache]


def plan(
    cfg: Config,
    direction: Direction,
    backend: TranslationBackend,
    cache: TranslationCache,
    keys: np.ndarray,
    check_stop: Callable[[], None] | None = None,
) -> Plan:
    """Record this version in its lineage and decide what it translates of the text `keys`."""
    sc = cfg.synthetic
    current = Version(cache.folder.name, cache.identity["models"], _valid_bleu(backend))
    versions = _record(Path(sc.cache_dir), direction, current)
    index = next(i for i, v in enumerate(versions) if v.cache == current.cache)
    lacking = cache.missing(keys)
    before = versions[:index][::-1][: _reach(sc.refresh_share)]  # newest first, those still read
    if not before:
        return Plan(lacking, [])
    previous = before[0]
    gain = _gain(previous, current)
    retranslate = sc.republished == "retranslate" or (gain is not None and gain >= sc.republished_margin)
    earlier = [] if retranslate else _open(Path(sc.cache_dir), before, check_stop)
    pending = lacking.copy()
    for other in earlier:
        pending &= other.missing(keys)
    kept = lacking & ~pending
    refreshed = kept & _bucket(keys, index, sc.refresh_share)
    pending |= refreshed
    if not pending.any():  # (this version's work was done on an earlier run)
        return Plan(pending, earlier)
    log.info(
        "%s: %s was replaced (version %d of these models and search%s): %s",
        direction.what,
        " + ".join(str(m) for m in direction.models),
        index + 1,
        _bleu_change(previous, current, gain, sc.republished_margin),
        f"every line translated again (synthetic.republished={sc.republished})"
        if retranslate
        else f"earlier translations kept for {int(kept.sum() - refreshed.sum())} lines, {int(refreshed.sum())} "
        f"refreshed (synthetic.refresh_share={sc.refresh_share}), {int(pending.sum() - refreshed.sum())} new",
    )
    return Plan(pending, earlier)


def chained(caches: list[TranslationCache], keys: np.ndarray) -> Iterator[str]:
    """Each key's translation from the first of `caches` that has it, in order."""
    for start in range(0, len(keys), BLOCK):
        block = keys[start : start + BLOCK]
        out: list[str] = [""] * len(block)
        left = np.ones(len(block), dtype=bool)
        for cache in caches:
            rows = np.flatnonzero(left & ~cache.missing(block))
            for row, text in zip(rows.tolist(), cache.translations(block[rows])):
                out[row] = text
            left[rows] = False
        if left.any():
            raise TfmError(f"{caches[0].folder}: lines missing from the translation caches")
        yield from out


def _valid_bleu(backend: TranslationBackend) -> list[float | None]:
    """Each model's validation BLEU as its checkpoint records it (an ensemble: the first
    member's metrics stand for the ensemble, the only ones the backend keeps)."""
    bleu = backend.metadata.metrics.get("valid_bleu")
    count = max(1, len(backend.metadata.members))
    return [float(bleu) if isinstance(bleu, (int, float)) else None] * count


def _gain(previous: Version, current: Version) -> float | None:
    a, b = previous.bleu(), current.bleu()
    return None if a is None or b is None else b - a


def _bleu_change(previous: Version, current: Version, gain: float | None, margin: float) -> str:
    if gain is None:
        return "; no validation BLEU recorded to compare"
    return f"; val BLEU {previous.bleu():.2f} -> {current.bleu():.2f}, {gain:+.2f} against a margin of {margin}"


def _reach(share: float) -> int | None:
    """How many earlier versions can still hold a line's newest translation (None: all, when
    no share is refreshed)."""
    return max(1, math.floor(1 / share + 0.5)) if share > 0 else None


def _bucket(keys: np.ndarray, version: int, share: float) -> np.ndarray:
    """The lines of `keys` that version number `version` refreshes: one of round(1 / share)
    buckets by key, a different one for each version (none when `share` is 0)."""
    if share <= 0:
        return np.zeros(len(keys), dtype=bool)
    buckets = max(1, math.floor(1 / share + 0.5))
    chosen: np.ndarray = (keys % np.uint64(buckets)) == np.uint64(version % buckets)
    return chosen


def _lineage_file(root: Path, direction: Direction) -> Path:
    paths = [str(Path(m).resolve()) for m in direction.models]
    digest = hashlib.sha256(json.dumps({"paths": paths, **direction.search}, sort_keys=True).encode()).hexdigest()[:16]
    return root / "lineages" / f"{direction.kind}-{digest}.json"


def _record(root: Path, direction: Direction, current: Version) -> list[Version]:
    """The lineage's versions, oldest first, with `current` (appended when new)."""
    path = _lineage_file(root, direction)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise TfmError(f"cannot create {path.parent}: {e.strerror}") from None
    with exclusive_lock(path.with_suffix(".lock")):
        versions = _read(path)
        if all(v.cache != current.cache for v in versions):
            versions.append(current)
            atomic_write_json(
                path,
                {
                    "paths": [str(Path(m).resolve()) for m in direction.models],
                    "versions": [asdict(v) for v in versions],
                },
            )
    return versions


def _read(path: Path) -> list[Version]:
    """The versions a lineage file lists (none when it is missing or unreadable: it only
    saves translating again, never decides what is right)."""
    try:
        raw: Any = json.loads(path.read_text(encoding="utf-8"))
        return [Version(str(v["cache"]), list(v["models"]), list(v["valid_bleu"])) for v in raw["versions"]]
    except FileNotFoundError:
        return []
    except (OSError, ValueError, KeyError, TypeError):
        log.warning("warning: %s is unreadable: earlier translations of these models are not reused", path)
        return []


def _open(root: Path, versions: list[Version], check_stop: Callable[[], None] | None) -> list[TranslationCache]:
    """The caches of `versions` that are still there."""
    out = []
    for v in versions:
        folder = root / v.cache
        try:
            identity = json.loads((folder / "cache.json").read_text(encoding="utf-8"))["identity"]
        except (OSError, ValueError, KeyError, TypeError):
            continue  # removed (or unreadable): its lines are translated again
        out.append(TranslationCache(folder, identity, check_stop))
    return out
