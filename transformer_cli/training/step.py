"""The loss of one training batch (fairseq's "criterion"): label-smoothed cross-entropy over the
target tokens, plus R-Drop's consistency term when its rdrop_alpha is set (train.criterion_options). The trainer sums it
over a step's batches, normalises it and backpropagates it; this module knows nothing of
optimizers, ranks or schedules, so it is tested on its own (tests/training/test_step.py)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from ..config_train import TrainConfig
from ..data.batching import Batch
from ..host.device import autocast
from ..loss import sequence_loss, symmetric_kl
from ..seams import CRITERIA, Criterion
from .criterion_settings import CrossEntropyOptions


@dataclass(frozen=True)
class BatchLoss:
    pad_id: int  # the target vocabulary's <pad>: positions not scored
    label_smoothing: float = 0.0  # epsilon_ls
    rdrop_alpha: float = 0.0  # weight of R-Drop's symmetric KL; 0: off

    @classmethod
    def from_config(cls, tc: TrainConfig, pad_id: int) -> BatchLoss:
        own: CrossEntropyOptions = CRITERIA.options(tc.criterion, tc.criterion_options)
        return cls(pad_id, own.label_smoothing, own.rdrop_alpha)

    def __call__(self, net: nn.Module, batch: Batch, dtype: torch.dtype | None) -> tuple[Tensor, Tensor]:
        """The batch's summed training loss (with gradients) and summed NLL (for perplexity),
        the forward pass under autocast to `dtype` (None: fp32) on the batch's device.

        With R-Drop the batch is stacked on itself, so one forward pass draws two dropout masks
        per pair; the loss is the two copies' mean plus alpha times their symmetric KL (Liang et
        al. 2021, Eq. 3, halved), the NLL their mean."""
        device, tgt_out = batch.src.device, batch.tgt_out
        if self.rdrop_alpha == 0.0:
            with autocast(device, dtype):
                logits = net(batch.src, batch.tgt_in)  # [batch, tgt_len, vocab]
            return sequence_loss(logits, tgt_out, self.pad_id, self.label_smoothing)
        with autocast(device, dtype):
            logits = net(batch.src.repeat(2, 1), batch.tgt_in.repeat(2, 1))  # [2·batch, tgt_len, vocab]
        loss, nll = sequence_loss(logits, tgt_out.repeat(2, 1), self.pad_id, self.label_smoothing)
        first, second = logits.chunk(2)  # the two passes: [batch, tgt_len, vocab] each
        consistency = symmetric_kl(first, second, tgt_out, self.pad_id)
        return loss / 2 + self.rdrop_alpha * consistency / 2, nll / 2


def criterion(tc: TrainConfig, pad_id: int) -> Criterion:
    """train.criterion's loss (a UsageError names the known ones). A CRITERIA entry (seams.py)
    makes a criterion from the train settings and the target <pad> id (its own settings:
    CRITERIA.options(tc.criterion, tc.criterion_options)); called with (net, batch, dtype), it
    returns the batch's summed training loss and summed NLL."""
    return CRITERIA[tc.criterion](tc, pad_id)
