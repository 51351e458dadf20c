"""A config's glossary (decode.glossary) as a part of its training data (data/parts.py), one
pair a term, so that a night learns the terms the decoder otherwise has to place under
constraints: `<data.dir>/<name>.glossary/glossary.<src>` and `.<tgt>`, mixed in
corrections.glossary_weight times an epoch (training/mix_plan.py)."""

from __future__ import annotations

import logging
from pathlib import Path

from ..config import Config
from ..data.parts import PartInput, write_part
from .glossary import read_glossary

PART = "glossary"
log = logging.getLogger("tfm")


def glossary_part(cfg: Config) -> PartInput | None:
    """decode.glossary's terms as a part of the training data, one pair a term (None: no
    glossary, or corrections.glossary_weight 0), in `<data.dir>/<name>.glossary/`; one log
    line says how many and how often."""
    if cfg.decode.glossary is None or not cfg.corrections.glossary_weight:
        return None
    glossary = read_glossary(Path(cfg.decode.glossary))
    log.info(
        "glossary: %d terms of %s (x%d an epoch)", len(glossary), cfg.decode.glossary, cfg.corrections.glossary_weight
    )
    if not len(glossary):
        return None
    sides = ([t.source for t in glossary.terms], [t.target for t in glossary.terms])
    folder = Path(cfg.data.dir) / f"{cfg.name}.{PART}"
    return write_part(folder, PART, (cfg.data.src_lang, cfg.data.tgt_lang), sides)
