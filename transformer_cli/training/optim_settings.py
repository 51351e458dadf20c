"""The settings of tfm's own optimizers and schedules (train.optimizer_options of adam and
adamw, train.schedule_options of inverse_sqrt), beside training/optim.py, which implements them.
Imports no torch: a config's options are read with these classes where it is loaded
(seams.OPTIMIZERS and seams.SCHEDULES name them by path)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..config_values import ConfigError, Section
from ..config_values import schema_field as _f


@dataclass
class AdamOptions(Section):
    """train.optimizer_options of adam and adamw (Kingma & Ba 2015; AdamW: Loshchilov & Hutter
    2019, the decay decoupled from the gradient's moments)."""

    SECTION: ClassVar[str] = "train.optimizer_options"

    betas: list[float] = _f([0.9, 0.98], "beta1, beta2: decay of the moment estimates (the paper's 0.9, 0.98).")
    eps: float = _f(1e-9, "Added to the second moment's root (the paper's 1e-9).", gt=0.0)
    weight_decay: float = _f(
        0.0, "Weight decay of the matrices (projections, embeddings); biases and LayerNorm gains get none.", ge=0.0
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if len(self.betas) != 2 or not all(0.0 <= b < 1.0 for b in self.betas):
            key = f"{self.SECTION}.betas"
            raise ConfigError(f"{key} must be two numbers in [0, 1) (got {self.betas})", key)


@dataclass
class InverseSqrtOptions(Section):
    """train.schedule_options of inverse_sqrt: the paper's schedule, a linear warmup to
    train.lr, then train.lr x sqrt(warmup_steps / step)."""

    SECTION: ClassVar[str] = "train.schedule_options"

    warmup_steps: int = _f(4000, "Steps of the linear warmup (the paper: 4000).", ge=1)
