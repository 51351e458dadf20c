"""What a person watching `tfm train` on a terminal sees during an epoch: a tqdm bar of its
steps, with the epoch's training loss, perplexity and speed so far every 20 steps."""

from __future__ import annotations

import math

import torch
from tqdm import tqdm

from .progress import Progress

SHOW_EVERY = 20  # steps between loss updates (each reads the loss back from the device)


def epoch_bar(p: Progress, steps: int, enabled: bool) -> tqdm:
    """The bar of the current epoch's `steps` optimizer steps, from where the run stands."""
    return tqdm(
        total=steps,
        initial=p.batch_in_epoch,
        desc=f"epoch {p.epoch + 1}",
        unit="step",
        leave=False,
        dynamic_ncols=True,
        disable=not enabled,
    )


def show_loss(bar: tqdm, p: Progress, epoch_nll: torch.Tensor) -> None:
    """Every SHOW_EVERY steps: the epoch's loss, PPL and tokens/s on the bar (the summed NLL,
    a 0-dim tensor on the device, is read back only then)."""
    if bar.n % SHOW_EVERY == 0 and not bar.disable:
        loss = float(epoch_nll) / max(1, p.epoch_tokens)
        bar.set_postfix(
            loss=f"{loss:.3f}",
            ppl=f"{math.exp(min(loss, 50)):.1f}",
            tok_s=f"{p.epoch_tokens / max(p.epoch_train_s, 1e-9):.0f}",
        )
