"""The data a run trains on, prepared: the config's corpus, and the pairs it makes by
translating text (a `synthetic:` or `distill:` section, synthetic/mixture.py) as parts beside
it, encoded with the parent model's tokenizers when the run continues one (train.init_from,
training/parent.py). `tfm train`, `tfm preprocess` and `tfm evaluate` prepare it through
here, so none of them rebuilds what another made."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..config import Config
from ..data.prepared import Prepared
from ..data.preprocess import GivenTokenizers, prepare
from ..synthetic.mixture import training_parts
from .parent import parent_tokenizers

_UNSET: Any = object()


def prepare_run_data(
    cfg: Config, check_stop: Callable[[], None] | None = None, given: GivenTokenizers | None = _UNSET, **options: Any
) -> tuple[Prepared, bool]:
    """`preprocess.prepare` of what `cfg` trains on (`options`: force, verify, hold). `given`:
    the parent's tokenizers when the caller has resolved the parent already (tfm train)."""
    if given is _UNSET:
        given = parent_tokenizers(cfg)
    parts = training_parts(cfg, check_stop)
    return prepare(cfg, check_stop=check_stop, given=given, parts=parts, **options)
