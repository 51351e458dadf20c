"""A config's terms as a part of its training data (data/parts.py), one pair a term, so that a
night learns the terms the decoder otherwise has to place under constraints: those of
decode.glossary's file and of its store (decode.glossary_store, else corrections.store: the
accepted terms of `terms.jsonl`, over the file's), in
`<data.dir>/<name>.glossary/glossary.<src>` and `.<tgt>`, mixed in corrections.glossary_weight
times an epoch (training/mix_plan.py)."""

from __future__ import annotations

import logging
from pathlib import Path

from ..config import Config
from ..data.parts import PartInput, write_part
from .glossary import Glossary, read_glossary
from .store_terms import StoreTerms

PART = "glossary"
log = logging.getLogger("tfm")


def config_glossary(cfg: Config) -> Glossary | None:
    """The terms `cfg` translates with: its store's over its file's (None: neither named)."""
    file = read_glossary(Path(cfg.decode.glossary)) if cfg.decode.glossary is not None else None
    if cfg.glossary_store is None:
        return file
    stored = StoreTerms(cfg.glossary_store).glossary()
    return stored if file is None else stored.over(file)


def glossary_part(cfg: Config) -> PartInput | None:
    """The config's terms as a part of the training data, one pair a term (None: no terms, or
    corrections.glossary_weight 0), in `<data.dir>/<name>.glossary/`; one log line says how
    many, from where, and how often."""
    if not cfg.corrections.glossary_weight:
        return None
    glossary = config_glossary(cfg)
    if glossary is None:
        return None
    where = " and ".join(
        f"{what} {name}"
        for what, name in (("file", cfg.decode.glossary), ("store", cfg.glossary_store))
        if name is not None
    )
    log.info("glossary: %d terms of %s (x%d an epoch)", len(glossary), where, cfg.corrections.glossary_weight)
    if not len(glossary):
        return None
    sides = ([t.source for t in glossary.terms], [t.target for t in glossary.terms])
    folder = Path(cfg.data.dir) / f"{cfg.name}.{PART}"
    return write_part(folder, PART, (cfg.data.src_lang, cfg.data.tgt_lang), sides)
