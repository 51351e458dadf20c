"""The settings of tfm's own search strategies that have some (decode.strategy_options of
sample), beside inference/strategies.py, which implements them. Imports no torch: a config's
options are read with this class where it is loaded."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..config_values import Section
from ..config_values import schema_field as _f


@dataclass
class SamplingOptions(Section):
    """decode.strategy_options of sample: each token drawn from the model's distribution, of
    its k most likely tokens, sharpened or flattened by a temperature; one translation a source."""

    SECTION: ClassVar[str] = "decode.strategy_options"
    MOST_N_BEST: ClassVar[int] = 1  # translations it returns per source (decode.n_best at most this)

    topk: int = _f(0, "Draw from the k most likely tokens (0: all).", ge=0, le=1_000_000)
    temperature: float = _f(1.0, "Below 1 sharpens the distribution, above 1 flattens it.", gt=0.0, le=100.0)
    seed: int | None = _f(None, "A seed that repeats the draws (null: other draws every call).")
