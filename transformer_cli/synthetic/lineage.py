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
the default 0.05), however long the lineage.

What stays on disk is bounded too (`synthetic.prune_lineage`, on by default): each version's
entry records `keeps`, how many versions before it the runs at it may read (the widest of
them: round(1 / share) with `keep`, 0 with `retranslate`, null, all, with a share of 0 or
when that run has prune_lineage false), and its `number` (the buckets go on counting when
older entries are dropped). A lineage can read its newest version and the `keeps` before it,
the wider of the newest's and the one before's (so the rule of every config that ran at the
last version counts; an entry written before `keeps` existed counts as all). When a run adds
a version it prunes, under the cache root's lock (`<cache_dir>/.prune.lock`, one pruner at a
time), the caches of its lineage's versions outside that window:

    - one another lineage file of the cache root can still read (a fixed teacher whose digest
      is an old version's, another config's path to the same models) stays on disk; this
      lineage's file stops listing it, and the lineage that reads it prunes it in its turn;
    - one a process has open (reading or translating: synthetic/cache.py's `.in-use`) stays,
      still listed, and is pruned by a later night;
    - the rest are renamed to `.pruned-<name>-<id>` (never read as a cache), deleted, and
      dropped from the lineage file; a folder a crash left so is deleted by the next run that
      prunes or finds one; their count and size are one line of the log.

So a year of nightly re-published teachers leaves round(1 / share) + 1 caches of the lineage on
disk (21 at 0.05; 1 with `retranslate`; every one with a share of 0), and its lineage file as
many entries (beside, for a while, one another lineage reads or a process had open). Nothing
else is ever deleted: a cache no lineage file lists (a fixed model's made before lineages
existed) is never a candidate. A config that shares the lineage with a wider rule and did not
run at the last version loses the older caches it would have read: their lines are translated
again, once (to keep them all, set prune_lineage false in each config that shares the
cache_dir).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import re
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from ..config import Config
from ..config_synthetic import SyntheticConfig
from ..errors import TfmError
from ..fsutil import atomic_write_json, exclusive_lock
from ..inference.translate import TranslationBackend
from .cache import TranslationCache
from .cache_folders import REMOVED, remove, remove_leftovers
from .directions import Direction

log = logging.getLogger("tfm")
BLOCK = 65536  # keys looked up at a time
PRUNE_LOCK = ".prune.lock"  # the cache root's lock: held by the one process pruning it
CACHE_NAME = re.compile(r"[A-Za-z0-9_]+-[0-9a-f]{16}")  # synthetic/cache.py's cache_folder names


@dataclass(frozen=True)
class Version:
    """One version of a lineage: its cache folder (a name in the cache root), its models'
    digests and their validation BLEU (None where a model records none), its number (from 1,
    in the order versions came), and how many versions before it the runs at it may read
    (`keeps`; None: all)."""

    cache: str
    models: list[str]
    valid_bleu: list[float | None]
    number: int = 0
    keeps: int | None = None

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
    root = Path(sc.cache_dir)
    current = Version(cache.folder.name, cache.identity["models"], _valid_bleu(backend), keeps=_keeps(sc))
    versions, added = _record(root, direction, current)
    if sc.prune_lineage and added:
        prune(root, _lineage_file(root, direction), check_stop)
    elif sc.prune_lineage and any(root.glob(f"{REMOVED}*")):  # a pruner's crash left one
        with exclusive_lock(root / PRUNE_LOCK, check_stop):
            remove_leftovers(root)
    number = next(v.number for v in versions if v.cache == current.cache)
    lacking = cache.missing(keys)
    reach = _reach(sc.refresh_share)
    before = sorted(  # newest first, those still read
        (v for v in versions if v.number < number and (reach is None or v.number >= number - reach)),
        key=lambda v: v.number,
        reverse=True,
    )
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
    refreshed = kept & _bucket(keys, number - 1, sc.refresh_share)
    pending |= refreshed
    if not pending.any():  # (this version's work was done on an earlier run)
        return Plan(pending, earlier)
    log.info(
        "%s: %s was replaced (version %d of these models and search%s): %s",
        direction.what,
        " + ".join(str(m) for m in direction.models),
        number,
        _bleu_change(previous, current, gain, sc.republished_margin),
        f"every line translated again (synthetic.republished={sc.republished})"
        if retranslate
        else f"earlier translations kept for {int(kept.sum() - refreshed.sum())} lines, {int(refreshed.sum())} "
        f"refreshed (synthetic.refresh_share={sc.refresh_share}), {int(pending.sum() - refreshed.sum())} new",
    )
    return Plan(pending, earlier)


def prune(root: Path, lineage: Path, check_stop: Callable[[], None] | None = None) -> None:
    """Delete the caches of the versions of the lineage file `lineage` (in the cache root
    `root`) that no run can read again and no other lineage file reads (see the module
    docstring); one log line when any was deleted or is held open."""
    with exclusive_lock(root / PRUNE_LOCK, check_stop):
        remove_leftovers(root)
        versions = _read(lineage)
        window = {v.cache for v in _readable(versions)}
        dropped = [v for v in versions if v.cache not in window]
        if not dropped:
            return
        read = set(window)  # the caches a lineage file of the cache root can read
        for other in sorted((root / "lineages").glob("*.json")):
            if other == lineage:
                continue
            try:
                read |= {v.cache for v in _readable(_load(other))}
            except FileNotFoundError:
                continue
            except (OSError, ValueError, KeyError, TypeError, AttributeError):
                log.warning("warning: %s is unreadable: no translation cache is pruned until it is fixed", other)
                return
        unlisted: set[str] = set()
        pruned, freed, held = 0, 0, 0
        for v in dropped:
            if v.cache in read or not CACHE_NAME.fullmatch(v.cache):  # another lineage reads it (or no cache's name)
                unlisted.add(v.cache)
                continue
            folder = root / v.cache
            existed = folder.is_dir()
            try:
                size = remove(folder)
            except TfmError as e:  # (not the night's failure: the cache stays, listed)
                log.warning("warning: %s; it is kept", e)
                continue
            if size is None:  # a process has it open: a later night prunes it
                held += 1
                continue
            unlisted.add(v.cache)
            pruned += existed
            freed += size
        if unlisted:
            with exclusive_lock(lineage.with_suffix(".lock"), check_stop):
                try:
                    raw: Any = json.loads(lineage.read_text(encoding="utf-8"))
                    paths, now = [str(p) for p in raw["paths"]], _parse(raw)
                except (OSError, ValueError, KeyError, TypeError, AttributeError):
                    pass  # (gone or unreadable meanwhile: its next run starts it again)
                else:
                    _write(lineage, paths, [v for v in now if v.cache not in unlisted])
    if pruned or held:
        log.info(
            "lineage %s: %d older caches pruned (%.1f MB)%s; the newest %d versions are read (synthetic.prune_lineage)",
            lineage.stem,
            pruned,
            freed / 1e6,
            f", {held} kept while another process has them open" if held else "",
            len(window),
        )


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


def _keeps(sc: SyntheticConfig) -> int | None:
    """How many versions before its own a run of these settings may read (None: all; and
    with prune_lineage false, which keeps them all)."""
    if not sc.prune_lineage:
        return None
    return 0 if sc.republished == "retranslate" else _reach(sc.refresh_share)


def _readable(versions: list[Version]) -> list[Version]:
    """The versions a run can still read: the newest and the `keeps` before it, the wider of
    the newest's and the one before's (None: all)."""
    ordered = sorted(versions, key=lambda v: v.number)
    if not ordered:
        return []
    newest = ordered[-1]
    keeps = newest.keeps
    if len(ordered) > 1 and not _wider(keeps, ordered[-2].keeps):
        keeps = ordered[-2].keeps
    return ordered if keeps is None else [v for v in ordered if v.number >= newest.number - keeps]


def _wider(a: int | None, b: int | None) -> bool:
    """Whether reading `a` versions back reads more than `b` (None: all)."""
    return b is not None and (a is None or a > b)


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


def _record(root: Path, direction: Direction, current: Version) -> tuple[list[Version], bool]:
    """The lineage's versions, oldest first, with `current` (appended when new, numbered after
    the newest; else its `keeps` widened to the current run's), and whether it was new."""
    path = _lineage_file(root, direction)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise TfmError(f"cannot create {path.parent}: {e.strerror}") from None
    with exclusive_lock(path.with_suffix(".lock")):
        versions = _read(path)
        known = next((v for v in versions if v.cache == current.cache), None)
        if known is None:
            versions.append(replace(current, number=max((v.number for v in versions), default=0) + 1))
        elif _wider(current.keeps, known.keeps):
            versions = [replace(v, keeps=current.keeps) if v is known else v for v in versions]
        else:
            return versions, False
        _write(path, [str(Path(m).resolve()) for m in direction.models], versions)
    return versions, known is None


def _write(path: Path, paths: list[str], versions: list[Version]) -> None:
    atomic_write_json(path, {"paths": paths, "versions": [asdict(v) for v in versions]})


def _load(path: Path) -> list[Version]:
    """The versions a lineage file lists, oldest first; raises what reading or parsing it raised."""
    return _parse(json.loads(path.read_text(encoding="utf-8")))


def _parse(raw: Any) -> list[Version]:
    """The versions of a lineage file's contents (numbered by place in a file written before
    versions had numbers)."""
    out = []
    for place, v in enumerate(raw["versions"]):
        keeps = v.get("keeps")
        out.append(
            Version(
                str(v["cache"]),
                list(v["models"]),
                list(v["valid_bleu"]),
                int(v.get("number", place + 1)),
                None if keeps is None else int(keeps),
            )
        )
    return out


def _read(path: Path) -> list[Version]:
    """The versions a lineage file lists (none when it is missing or unreadable: it only
    saves translating again, never decides what is right)."""
    try:
        return _load(path)
    except FileNotFoundError:
        return []
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        log.warning("warning: %s is unreadable: earlier translations of these models are not reused", path)
        return []


def _open(root: Path, versions: list[Version], check_stop: Callable[[], None] | None) -> list[TranslationCache]:
    """The caches of `versions` that are still there (each held open: not pruned while this
    process reads it)."""
    out = []
    for v in versions:
        cache = TranslationCache.existing(root / v.cache, check_stop)
        if cache is not None:  # (else removed, or unreadable: its lines are translated again)
            out.append(cache)
    return out
