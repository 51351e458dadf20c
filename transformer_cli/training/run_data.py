"""The data a run trains on: the config's corpus and the parts beside it (data/parts.py) — the
pairs it makes by translating text (a `synthetic:` or `distill:` section, synthetic/mixture.py)
and its users' accepted corrections (corrections/training.py) — prepared, encoded with the
parent model's tokenizers when the run continues one (train.init_from, training/parent.py),
and mixed when batches are drawn (`training_split`, data/mixed.py). `tfm train`, `tfm
preprocess` and `tfm evaluate` prepare it through here, so none of them rebuilds what another
made."""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable
from typing import Any

from ..config import Config
from ..corrections.training import PART, corrections_part
from ..data.mixed import MixedSplit, Source
from ..data.prepared import Prepared
from ..data.preprocess import GivenTokenizers, prepare
from ..data.shards import ShardedSplit
from ..errors import UsageError
from ..synthetic.directions import makes_pairs, real_copies
from ..synthetic.mixture import mix_identity, synthetic_parts, synthetic_sources
from .parent import parent_tokenizers

_UNSET: Any = object()
log = logging.getLogger("tfm")


def prepare_run_data(
    cfg: Config, check_stop: Callable[[], None] | None = None, given: GivenTokenizers | None = _UNSET, **options: Any
) -> tuple[Prepared, bool]:
    """`preprocess.prepare` of what `cfg` trains on (`options`: force, verify, hold). `given`:
    the parent's tokenizers when the caller has resolved the parent already (tfm train)."""
    if given is _UNSET:
        given = parent_tokenizers(cfg)
    parts = synthetic_parts(cfg, check_stop)
    corrections = corrections_part(cfg)
    if corrections is not None:
        parts.append(corrections)
    return prepare(cfg, check_stop=check_stop, given=given, parts=parts, **options)


def training_split(cfg: Config, prepared: Prepared) -> ShardedSplit | MixedSplit:
    """What `cfg` trains on from its prepared folder: the corpus's training split alone, or
    the mix of it (the real pairs `real_copies` times), each direction's pairs (tagged as
    configured) and the accepted corrections (corrections.weight times); one log line says
    what the mix is."""
    real = prepared.split("train")
    if not prepared.manifest.parts:
        return real
    sources = [Source("train", real, real_copies(cfg) if makes_pairs(cfg) else 1)]
    if makes_pairs(cfg):
        sources += synthetic_sources(cfg, prepared)
    if PART in prepared.manifest.parts:
        sources.append(Source(PART, prepared.split(PART), cfg.corrections.weight))
    mixed = MixedSplit(sources)
    shares = [f"{len(s.split)} {s.name} pairs x{s.copies}{' (tagged)' if s.tag else ''}" for s in sources]
    log.info("training mix, drawn as batches are made: %s; %d pairs an epoch", ", ".join(shares), len(mixed))
    if not len(mixed):
        raise UsageError(f"nothing to train on: {', '.join(shares)}")
    return mixed


def data_identity(cfg: Config, prepared: Prepared) -> str:
    """What `cfg` trains on, as a run's identity takes it: the prepared folder's fingerprint and,
    when it has parts, how `training_split` mixes them."""
    if not prepared.manifest.parts:
        return prepared.fingerprint
    mix: dict[str, Any] = {"train": real_copies(cfg) if makes_pairs(cfg) else 1}
    if makes_pairs(cfg):
        mix.update(mix_identity(cfg))
    if PART in prepared.manifest.parts:
        mix[PART] = cfg.corrections.weight
    return hashlib.sha256(json.dumps([prepared.fingerprint, mix], sort_keys=True).encode()).hexdigest()
