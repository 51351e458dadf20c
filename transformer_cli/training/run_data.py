"""The data a run trains on, prepared: the config's corpus, or the teachers' translations of it
(a `distill:` section, training/distill.py), or it with pairs made from monolingual text (a
`synthetic:` section, synthetic/mixture.py), encoded with the parent model's tokenizers when
the run continues one (train.init_from, training/parent.py). `tfm train`, `tfm preprocess`
and `tfm evaluate` prepare it through here, so none of them rebuilds what another made."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..config import Config
from ..data.prepared import Prepared
from ..data.preprocess import GivenTokenizers, prepare
from ..synthetic.mixture import training_corpus as with_synthetic_pairs
from .distill import training_corpus
from .parent import parent_tokenizers

_UNSET: Any = object()


def prepare_run_data(
    cfg: Config, check_stop: Callable[[], None] | None = None, given: GivenTokenizers | None = _UNSET, **options: Any
) -> tuple[Prepared, bool]:
    """`preprocess.prepare` of what `cfg` trains on (`options`: force, verify, hold). `given`:
    the parent's tokenizers when the caller has resolved the parent already (tfm train)."""
    if given is _UNSET:
        given = parent_tokenizers(cfg)
    corpus = with_synthetic_pairs(training_corpus(cfg, check_stop), check_stop)
    return prepare(corpus, check_stop=check_stop, given=given, **options)
