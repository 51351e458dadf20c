"""Where a run stands (`Progress`, saved in last.pt) and the decisions taken from it.

Each decision is a small function of the progress and the train settings: whether a
validation is due, whether the run stops and why, whether a finished run may continue.
The loop (`loop.Trainer`) trains, measures and saves; these decide.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any, Literal

from ..config_train import TrainConfig
from .metrics import ValidationRecord

PendingValidation = Literal["epoch", "step"]  # which validation is due (None: none)
StopReason = Literal["epochs", "max_steps", "early_stopping"]  # why the run stopped (None: running)


@dataclass
class Progress:
    """Where a run stands. Saved in last.pt as plain data (`asdict`)."""

    step: int = 0  # optimizer steps done
    epoch: int = 0  # epochs completed
    batch_in_epoch: int = 0  # optimizer steps done in the current epoch
    pending_validation: PendingValidation | None = None
    best_valid_loss: float = math.inf
    best_step: int = -1
    bad_validations: int = 0  # validations in a row without improvement
    finished: bool = False
    stop_reason: StopReason | None = None
    pending_average: bool = False  # finished, checkpoint averaging still to do
    elapsed_s: float = 0.0  # wall time over all sessions
    epoch_nll: float = 0.0  # training NLL sum of the current epoch so far
    epoch_tokens: int = 0
    epoch_train_s: float = 0.0
    history: list[ValidationRecord] = field(default_factory=list)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Progress:
        """From a saved `asdict`; keys of other versions are ignored, missing ones defaulted
        (and the "" that older versions wrote for "none" read as None)."""
        known = {f.name for f in fields(cls)}
        values: dict[str, Any] = {k: (None if v == "" else v) for k, v in d.items() if k in known and k != "history"}
        progress = cls(**values)
        records = (ValidationRecord.read(r) for r in d.get("history", []))
        progress.history = [r for r in records if r is not None]
        return progress

    @property
    def last_record(self) -> ValidationRecord | None:
        """The latest validation's record (None before the first)."""
        return self.history[-1] if self.history else None

    def note_validation(self, valid_loss: float) -> bool:
        """Track the best validation loss; returns whether `valid_loss` improved on it."""
        improved = valid_loss < self.best_valid_loss
        if improved:
            self.best_valid_loss, self.best_step, self.bad_validations = valid_loss, self.step, 0
        else:
            self.bad_validations += 1
        return improved

    def start_epoch_totals(self) -> None:
        """Zero the training totals that one epoch's records are computed from."""
        self.epoch_tokens, self.epoch_train_s = 0, 0.0

    def finish_if(self, reason: StopReason | None, average_last: int) -> None:
        """Mark the run finished when `reason` is set; averaging then follows if configured."""
        if reason:
            self.finished, self.stop_reason = True, reason
        self.pending_average = self.finished and average_last > 1


def validation_due_within_epoch(p: Progress, tc: TrainConfig) -> bool:
    """After a step that does not end the epoch: max_steps reached or a valid_every boundary."""
    return bool((tc.max_steps and p.step >= tc.max_steps) or (tc.valid_every and p.step % tc.valid_every == 0))


def should_stop(p: Progress, tc: TrainConfig, end_of_epoch: bool) -> StopReason | None:
    """Why the run stops after the validation just done, or None to go on."""
    if end_of_epoch and p.epoch >= tc.epochs:
        return "epochs"
    if tc.max_steps and p.step >= tc.max_steps:
        return "max_steps"
    if tc.patience and p.bad_validations >= tc.patience:
        return "early_stopping"
    return None


def may_continue(p: Progress, tc: TrainConfig) -> bool:
    """Whether a run finished by epochs/max_steps would go on under raised limits in `tc`."""
    more_epochs = p.stop_reason == "epochs" and p.epoch < tc.epochs
    more_steps = p.stop_reason == "max_steps" and (tc.max_steps is None or p.step < tc.max_steps)
    return more_epochs or more_steps
