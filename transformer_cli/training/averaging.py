"""Checkpoint averaging: the element-wise mean of the last snapshots' weights.

`Snapshots` owns `<run>/snapshots/`: the weights of the last `keep` snapshots, taken at each
epoch end (and every `train.snapshot_every_steps` steps), and their average at the end of the
run. `trying_weights` lends a model other weights (the average, while it is validated and
perhaps saved) and gives its own back.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from ..checkpoint import CheckpointError, load_checkpoint, save_checkpoint

log = logging.getLogger("tfm")


def average_state_dicts(states: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """Mean of each floating-point tensor over `states`; other tensors come from the last one."""
    averaged = {}
    for key, last in states[-1].items():
        if last.is_floating_point():
            averaged[key] = torch.stack([s[key].float() for s in states]).mean(0).to(last.dtype)
        else:
            averaged[key] = last
    return averaged


class Snapshots:
    """The last `keep` snapshots, `<folder>/step_NNNNNNNN.pt` by optimizer step, to be averaged."""

    def __init__(self, folder: Path, keep: int):
        self.folder, self.keep = Path(folder), keep

    @property
    def enabled(self) -> bool:
        """Averaging takes at least two snapshots (train.average_last > 1)."""
        return self.keep > 1

    def paths(self) -> list[Path]:
        """The kept snapshots, oldest first."""
        return sorted(self.folder.glob("step_*.pt"))

    def add(self, step: int, payload: dict[str, Any]) -> None:
        """Save `payload` (the weights after optimizer step `step`; taking the same step twice
        replaces it) and drop all but the last `keep`."""
        self.folder.mkdir(exist_ok=True)
        save_checkpoint(self.folder / f"step_{step:08}.pt", payload)
        for old in self.paths()[: -self.keep]:
            old.unlink()

    def average(self) -> tuple[dict[str, torch.Tensor], int] | None:
        """The kept weights' average and how many were averaged; None with fewer than two
        snapshots or a damaged one (logged: the run then keeps its best single checkpoint)."""
        paths = self.paths()
        if len(paths) < 2:
            return None
        try:
            states = [load_checkpoint(p)["state_dict"] for p in paths]
        except CheckpointError as e:
            log.warning("checkpoint averaging skipped: %s", e)
            return None
        return average_state_dicts(states), len(paths)


@contextlib.contextmanager
def trying_weights(model: torch.nn.Module, state: dict[str, torch.Tensor]) -> Iterator[None]:
    """Load `state` into `model` for the block; the model's own weights come back afterwards,
    also when the block raises (a stop request: last.pt must hold the trained weights)."""
    own = {k: v.clone() for k, v in model.state_dict().items()}
    model.load_state_dict(state)
    try:
        yield
    finally:
        model.load_state_dict(own)
