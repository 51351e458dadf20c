"""The data a run trains on: the config's corpus and the parts beside it (data/parts.py) — the
pairs it makes by translating text (its `synthetic:` section, synthetic/mixture.py)
and its users' accepted corrections (corrections/training.py) — prepared, encoded with the
parent model's tokenizers when the run continues one (train.init_from, training/parent.py),
and mixed when batches are drawn as its plan says (`training_split`, training/mix_plan.py).
`tfm train`, `tfm preprocess` and `tfm evaluate` prepare it through here, so none of them
rebuilds what another made."""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable
from typing import Any

from ..config import Config
from ..corrections.glossary_part import glossary_part
from ..corrections.training import corrections_part
from ..data.freshness import GivenTokenizers
from ..data.mixed import MixedSplit
from ..data.prepared import Prepared
from ..data.preprocess import prepare
from ..data.shards import ShardedSplit
from ..synthetic.mixture import synthetic_parts
from .mix_plan import mix_plan
from .parent import parent_tokenizers

_UNSET: Any = object()
log = logging.getLogger("tfm")


def prepare_run_data(
    cfg: Config,
    check_stop: Callable[[], None] | None = None,
    given: GivenTokenizers | None = _UNSET,
    parts_of: Config | None = None,
    **options: Any,
) -> tuple[Prepared, bool]:
    """`preprocess.prepare` of what `cfg` trains on (`options`: force, verify, hold). `given`:
    the parent's tokenizers when the caller has resolved the parent already (tfm train).
    `parts_of`: the config whose parts (synthetic text, corrections) are mixed in, when not
    `cfg` (a run from scratch behind the nights takes its nightly config's: scratch_run.py)."""
    if given is _UNSET:
        given = parent_tokenizers(cfg)
    parts = synthetic_parts(parts_of or cfg, check_stop)
    parts += [p for p in (corrections_part(parts_of or cfg), glossary_part(parts_of or cfg)) if p is not None]
    reserved = mix_plan(cfg).specials()
    return prepare(cfg, check_stop=check_stop, given=given, parts=parts, reserved=reserved, **options)


def training_split(cfg: Config, prepared: Prepared) -> ShardedSplit | MixedSplit:
    """What `cfg` trains on from its prepared folder (training/mix_plan.py); one log line says
    what the mix is when there is one."""
    plan = mix_plan(cfg)
    split = plan.split(prepared)
    if isinstance(split, MixedSplit):
        log.info("training mix, drawn as batches are made: %s; %d pairs an epoch", plan.describe(prepared), len(split))
    return split


def data_identity(cfg: Config, prepared: Prepared) -> str:
    """What `cfg` trains on, as a run's identity takes it: the prepared folder's fingerprint and,
    when it has parts, how the plan mixes them."""
    if not prepared.manifest.parts:
        return prepared.fingerprint
    mix = mix_plan(cfg).identity(prepared)
    return hashlib.sha256(json.dumps([prepared.fingerprint, mix], sort_keys=True).encode()).hexdigest()
