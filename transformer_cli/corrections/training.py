"""The accepted corrections of a config's store as a part of its training data (data/parts.py):
`<data.dir>/<name>.corrections/corrections.<src>` and `.<tgt>`, the latest accepted correction
of each source, in the order they were accepted, so a night with new corrections appends to
the part and encodes those alone. Training mixes them in `corrections.weight` times an epoch."""

from __future__ import annotations

import json
import logging
from collections import Counter
from pathlib import Path
from typing import Any

from ..config import Config
from ..data.parts import PartInput, write_part
from ..fsutil import atomic_write_json
from .guards import over_cap
from .state import normalised
from .store import TERMS, Correction, CorrectionStore

PART = "corrections"
TRAINED = "trained.json"  # the part's store and the time of its newest correction
log = logging.getLogger("tfm")


def corrections_folder(cfg: Config) -> Path:
    return Path(cfg.data.dir) / f"{cfg.name}.corrections"


def accepted(store: CorrectionStore) -> list[Correction]:
    """The latest accepted correction of each source, in the order they were accepted (the
    store's fold, which the translation memory and the guards read too)."""
    return list(store.current().values())


def corrections_part(cfg: Config) -> PartInput | None:
    """The config's accepted corrections as a part (None: corrections off, or none accepted);
    one log line says how many, from how many callers, how many data.limit_train keeps (the
    first N, as of every source), and how many are held."""
    if cfg.corrections.store is None:
        return None
    store = CorrectionStore(cfg.corrections.store)
    for log_of in (store, CorrectionStore(cfg.corrections.store, TERMS)):
        compact_if_overgrown(log_of, cfg.corrections.compact_over)
    every = store.corrections()
    taken = accepted(store)
    chosen = taken[: cfg.data.limit_train]
    held = sum(c.status == "held" for c in every)
    callers = Counter(c.caller or "-" for c in taken)
    limited = f", the first {len(chosen)} trained on (data.limit_train)" if len(chosen) < len(taken) else ""
    log.info(
        "corrections: %d accepted from %d caller(s)%s (x%d an epoch), %d held for review (tfm feedback list --held)",
        len(taken),
        len(callers),
        limited,
        cfg.corrections.weight,
        held,
    )
    capped = Counter(c.caller or "-" for c in every if c.status == "held" and over_cap(c))
    for who, n in sorted(capped.items()):
        log.info(
            "corrections: caller %s reached its daily cap (corrections.per_client_per_day): %d of its "
            "corrections held, not trained on",
            who,
            n,
        )
    if not chosen:
        (corrections_folder(cfg) / TRAINED).unlink(missing_ok=True)
        return None
    sides = ([normalised(c.source) for c in chosen], [normalised(c.corrected) for c in chosen])
    part = write_part(corrections_folder(cfg), PART, (cfg.data.src_lang, cfg.data.tgt_lang), sides)
    newest = {"store": str(Path(cfg.corrections.store).resolve()), "until": max(c.time for c in chosen)}
    atomic_write_json(corrections_folder(cfg) / TRAINED, newest)
    return part


def trained_on(cfg: Config) -> dict[str, Any] | None:
    """Which corrections the config's prepared part holds: its store (resolved) and the time of
    the newest (`until`), as `corrections_part` last wrote them (None: no part). A run's
    checkpoints record it (`training.corrections`), so that a server of the store leaves the
    corrections its model was trained on to the model (serving's near-matches)."""
    try:
        record = json.loads((corrections_folder(cfg) / TRAINED).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    ok = isinstance(record, dict) and isinstance(record.get("store"), str) and isinstance(record.get("until"), float)
    return record if ok else None


def compact_if_overgrown(store: CorrectionStore, over: float | None) -> None:
    """Compact the store's log when it has grown `over` times past its records (corrections.
    compact_over; None: never here), and say so in one line."""
    if over is not None and store.overgrown(over):
        before, after = store.compact()
        log.info("%s compacted: %d line(s) -> %d (corrections.compact_over %g)", store.path, before, after, over)


def trained_until(training: dict[str, Any], store: Path) -> float | None:
    """The time of the newest of `store`'s corrections a model's run trained on, from its
    checkpoint's `training` record (`trained_on`; None: none of this store's)."""
    record = training.get("corrections")
    if not isinstance(record, dict) or record.get("store") != str(store.resolve()):
        return None
    until = record.get("until")
    return float(until) if isinstance(until, (int, float)) else None
