"""Checkpoint averaging: the element-wise mean of the last snapshots' weights.

`Snapshots` owns `<run>/snapshots/`: the weights of the last `keep` snapshots, taken at each
epoch end (and every `train.snapshot_every_steps` steps), and their average at the end of the
run. `trying_weights` lends a model other weights (the average, while it is validated and
perhaps saved) and gives its own back.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import torch

from ..checkpoint import Checkpoint, CheckpointError
from ..contracts.model import TranslationModel

log = logging.getLogger("tfm")


def average_state_dicts(states: Iterable[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """Mean of each floating-point tensor over `states`; other tensors come from the last one.
    The states are summed in fp32 one at a time, so an iterator that loads them holds one
    besides the sum (a stack of all of them lifted a run's peak memory by their total size)."""
    total: dict[str, torch.Tensor] = {}
    last: dict[str, torch.Tensor] = {}
    n = 0
    for last in states:
        n += 1
        for key, value in last.items():
            if not value.is_floating_point():
                continue
            if key in total:
                total[key] += value.float()
            else:
                total[key] = value.float().clone()
    return {
        key: (total[key] / n).to(value.dtype) if value.is_floating_point() else value for key, value in last.items()
    }


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

    def add(self, step: int, checkpoint: Checkpoint) -> None:
        """Save `checkpoint` (the weights after optimizer step `step`; taking the same step
        twice replaces it) and drop all but the last `keep`."""
        self.folder.mkdir(exist_ok=True)
        checkpoint.write(self.folder / f"step_{step:08}.pt")
        for old in self.paths()[: -self.keep]:
            old.unlink()

    def average(self) -> tuple[dict[str, torch.Tensor], int] | None:
        """The kept weights' average and how many were averaged; None with fewer than two
        snapshots or a damaged one (logged: the run then keeps its best single checkpoint)."""
        paths = self.paths()
        if len(paths) < 2:
            return None
        try:
            return average_state_dicts(Checkpoint.read(p).weights for p in paths), len(paths)
        except CheckpointError as e:
            log.warning("checkpoint averaging skipped: %s", e)
            return None


@contextlib.contextmanager
def trying_weights(model: TranslationModel[Any], state: dict[str, torch.Tensor]) -> Iterator[None]:
    """Load `state` into `model` for the block; the model's own weights come back afterwards,
    also when the block raises (a stop request: last.pt must hold the trained weights)."""
    own = {k: v.clone() for k, v in model.state_dict().items()}
    model.load_state_dict(state)
    try:
        yield
    finally:
        model.load_state_dict(own)
