"""The settings of tfm's own training criterion (train.criterion_options of cross_entropy),
beside training/step.py, which implements it. Imports no torch: a config's options are read
with this class where it is loaded (seams.CRITERIA names it by path)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..config_values import Section
from ..config_values import schema_field as _f


@dataclass
class CrossEntropyOptions(Section):
    """train.criterion_options of cross_entropy: label-smoothed cross-entropy over the target
    tokens, pads left out, with R-Drop's consistency term when its alpha is set."""

    SECTION: ClassVar[str] = "train.criterion_options"

    label_smoothing: float = _f(0.0, "Label smoothing (epsilon_ls; the paper uses 0.1).", ge=0.0, lt=1.0)
    rdrop_alpha: float = _f(
        0.0,
        "R-Drop weight alpha (Liang et al. 2021): each batch goes through the model twice under "
        "different dropout, and alpha times the symmetric KL of the two outputs joins their mean "
        "loss. 0: off. Doubles the step cost.",
        ge=0.0,
        le=1000.0,
    )
