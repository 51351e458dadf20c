"""The accepted corrections of a config's store as a part of its training data (data/parts.py):
`<data.dir>/<name>.corrections/corrections.<src>` and `.<tgt>`, the latest accepted correction
of each source, in the order they were accepted, so a night with new corrections appends to
the part and encodes those alone. Training mixes them in `corrections.weight` times an epoch."""

from __future__ import annotations

import logging
from collections import Counter
from pathlib import Path

from ..config import Config
from ..data.parts import PartInput, write_part
from .guards import over_cap
from .state import normalised
from .store import Correction, CorrectionStore

PART = "corrections"
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
        return None
    sides = ([normalised(c.source) for c in chosen], [normalised(c.corrected) for c in chosen])
    return write_part(corrections_folder(cfg), PART, (cfg.data.src_lang, cfg.data.tgt_lang), sides)
