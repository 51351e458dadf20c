"""Checkpoint averaging: the element-wise mean of several checkpoints' weights."""

from __future__ import annotations

import torch


def average_state_dicts(states: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """Mean of each floating-point tensor over `states`; other tensors come from the last one."""
    averaged = {}
    for key, last in states[-1].items():
        if last.is_floating_point():
            averaged[key] = torch.stack([s[key].float() for s in states]).mean(0).to(last.dtype)
        else:
            averaged[key] = last
    return averaged
