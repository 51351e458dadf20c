"""A model's negative log-likelihood of reference translations (teacher forcing), and the
eval-mode block every decode and score runs in."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch

from ..contracts.model import TranslationModel
from ..data.batching import collate, plan_batches
from ..data.shards import TokenPairs
from ..host.device import autocast
from ..loss import sequence_loss
from ..tokenizers.vocab import Framing

# Tokens per scoring batch: memory depends on it, the sum (up to rounding) not. Each batch holds
# its logits [tokens, vocabulary] in fp32 two or three times over: at 8000 tokens and base.yaml's
# 8k vocabulary that added 690 MiB to a training run's peak, its largest (benchmarks/validation_memory.py).
VALID_BATCH_TOKENS = 2000


@contextlib.contextmanager
def eval_mode(model: TranslationModel[Any] | torch.nn.Module) -> Iterator[None]:
    """Dropout off for the block; every submodule's train/eval mode is restored afterwards,
    so scoring or decoding a model that is being trained does not change how it trains."""
    modes = [(m, m.training) for m in model.modules()]
    model.eval()
    try:
        yield
    finally:
        for m, training in modes:
            m.training = training


def scoring_batches(
    split: TokenPairs, shard: tuple[int, int] = (0, 1), batch_tokens: int = VALID_BATCH_TOKENS
) -> list[np.ndarray]:
    """The batches (pair indices) `corpus_nll` scores of `shard` = (rank, world size)."""
    rank, world = shard
    return plan_batches(
        split.src_lengths, split.tgt_lengths, batch_size=None, batch_tokens=batch_tokens, shuffle=False
    )[rank::world]


def corpus_nll(
    model: TranslationModel[Any],
    split: TokenPairs,
    device: torch.device,
    dtype: torch.dtype | None,
    batch_tokens: int = VALID_BATCH_TOKENS,
    max_positions: int | None = None,
    shard: tuple[int, int] = (0, 1),
    check_stop: Callable[[], None] | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Summed NLL and target-token count over a split (or this rank's `shard` of it), framed
    with the model's special ids.

    Returns two 0-dim tensors on `device`, so distributed callers can all-reduce them.
    `check_stop` is called between batches (it may raise to abort).
    """
    batches = scoring_batches(split, shard, batch_tokens)
    nll = torch.zeros((), device=device)
    tokens = torch.zeros((), device=device, dtype=torch.long)
    framing = Framing(model.src_ids, model.tgt_ids)
    with torch.inference_mode(), eval_mode(model):
        for indices in batches:
            if check_stop:
                check_stop()
            b = collate(split, indices, framing, max_positions).to(device)
            with autocast(device, dtype):
                logits = model(b.src, b.tgt_in)  # [batch, tgt_len, vocab]
            nll += sequence_loss(logits.float(), b.tgt_out, framing.tgt.pad)[1]  # fp32: exact reported loss
            tokens += b.n_tokens
    return nll, tokens
