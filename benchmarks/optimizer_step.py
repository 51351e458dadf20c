"""Time of one Adam step on a config's model: multi-tensor (foreach) vs fused kernel, as JSON.

    python benchmarks/optimizer_step.py --config base.yaml

Each variant gets its own copy of the parameters with random gradients, then does --warmup
and --steps optimizer steps, in one process, back to back.
"""

from __future__ import annotations

import argparse
import copy
import json
import time

import torch

from transformer_cli.config_loading import load_config
from transformer_cli.model.transformer import Seq2SeqTransformer
from transformer_cli.model.transformer_config import TransformerConfig


def time_steps(model: torch.nn.Module, fused: bool, steps: int, warmup: int) -> float:
    """Mean seconds per Adam step, with random gradients on every parameter."""
    for p in model.parameters():
        p.grad = torch.randn_like(p)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4, fused=fused, foreach=None if fused else True)
    for _ in range(warmup):
        opt.step()
    started = time.perf_counter()
    for _ in range(steps):
        opt.step()
    return (time.perf_counter() - started) / steps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="base.yaml")
    ap.add_argument("--src-vocab", type=int, default=8000)
    ap.add_argument("--tgt-vocab", type=int, default=8000)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=5)
    args = ap.parse_args()

    cfg = load_config(args.config)
    assert isinstance(cfg.model, TransformerConfig), "a Transformer's config"
    base = Seq2SeqTransformer(cfg.model, args.src_vocab, args.tgt_vocab)
    result = {
        "config": args.config,
        "parameters": sum(p.numel() for p in base.parameters()),
        "threads": torch.get_num_threads(),
    }
    for name, fused in (("foreach", False), ("fused", True)):
        result[f"{name}_ms"] = round(1000 * time_steps(copy.deepcopy(base), fused, args.steps, args.warmup), 3)
    result["fused_speedup"] = round(result["foreach_ms"] / result["fused_ms"], 2)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
