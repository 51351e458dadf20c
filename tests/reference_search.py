"""The slow textbook greedy loop that tests/inference/test_search.py, test_translate_cli.py and
benchmarks/decode_speed.py compare inference/search.py's cached, batched `greedy_search` with."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from transformer_cli.contracts.model import TranslationModel
from transformer_cli.contracts.strategy import Hypothesis
from transformer_cli.inference import search


@torch.inference_mode()
def greedy_search_uncached(model: TranslationModel[Any], src: Tensor, limits: Tensor) -> list[Hypothesis]:
    """Reference greedy search: one sentence at a time, the whole prefix re-run each step
    (the model's teacher-forcing call), the start token never produced and <eos> forced at
    the limit as in `greedy_search`."""
    results, (sos, eos) = [], (model.tgt_ids.sos, model.tgt_ids.eos)
    for i in range(src.size(0)):
        prefix = torch.tensor([[sos]], device=src.device)
        log_prob = 0.0
        for t in range(int(limits[i])):
            log_probs = torch.log_softmax(model(src[i : i + 1], prefix)[0, -1].float(), dim=-1)
            log_probs = search._force_eos(
                search._never_start(log_probs[None], model.tgt_ids), torch.tensor([t + 1 >= int(limits[i])]), eos
            )[0]
            lp, tok = log_probs.max(dim=-1)
            log_prob += float(lp)
            if int(tok) == eos:
                break
            prefix = torch.cat([prefix, tok.view(1, 1)], dim=1)
        tokens = prefix[0, 1:].tolist()
        results.append(Hypothesis(tokens, log_prob, log_prob / (len(tokens) + 1)))
    return results
