"""How much a training run's validation adds to its peak memory, printed as JSON.

A validation scores the validation set's loss (teacher forcing, `corpus_nll`, in batches of
`--batch-tokens` target tokens) and, with train.valid_bleu, greedy-decodes it. Each
measurement runs in a fresh process with the allocator `tfm train` would preload (the same
re-execution), loads the checkpoint, warms up on small batches, then reports its peak RSS
(`ru_maxrss`) before and after the one call: the difference is what that stage adds on top
of the model.

    python benchmarks/validation_memory.py --config base.yaml --checkpoint checkpoints/base/best.pt
    python benchmarks/validation_memory.py --config base.yaml --batch-tokens 8000 2000 --decode-batch 128 32
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import resource
import subprocess
import sys
from pathlib import Path

from transformer_cli.host import allocator


def peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def single(config: str, overrides: list[str], checkpoint: str, stage: str, size: int) -> dict:
    import torch

    from transformer_cli.config_loading import load_config
    from transformer_cli.data.prepared import load_prepared
    from transformer_cli.host.device import autocast_dtype
    from transformer_cli.inference.teacher_forcing import corpus_nll
    from transformer_cli.inference.translate import TorchTranslator

    torch.set_num_threads(1)
    cfg = load_config(config, overrides)
    prepared = load_prepared(cfg)
    device = torch.device("cpu")
    dtype = autocast_dtype(device, cfg.train.precision)
    translator = TorchTranslator.from_checkpoint(Path(checkpoint), device, dtype=dtype)
    val = prepared.split("val")
    corpus_nll(translator.model, val, device, dtype, batch_tokens=500, max_positions=cfg.model.max_len)
    before = peak_mib()
    if stage == "loss":
        nll, tokens = corpus_nll(
            translator.model, val, device, dtype, batch_tokens=size, max_positions=cfg.model.max_len
        )
        result = {"valid_loss": round(float(nll) / int(tokens), 5)}
    else:
        greedy = dataclasses.replace(translator.decode, beam_size=1, n_best=1, batch_size=size)
        translator.translate(prepared.text("val", cfg.data.src_lang), greedy)
        result = {}
    return {
        "stage": stage,
        "size": size,
        "allocator": allocator.in_use(),
        "precision": str(dtype or "fp32").replace("torch.", ""),
        "peak_before_mib": round(before),
        "peak_after_mib": round(peak_mib()),
        "added_mib": round(peak_mib() - before),
        **result,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", default="base.yaml")
    ap.add_argument("--set", dest="overrides", action="append", default=[])
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument(
        "--batch-tokens",
        type=int,
        nargs="+",
        default=[8000, 2000],
        help="validation-loss batch sizes in target tokens, one process each",
    )
    ap.add_argument(
        "--decode-batch",
        type=int,
        nargs="+",
        default=[128],
        help="greedy decoding batch sizes in sentences, one process each",
    )
    ap.add_argument("--single", nargs=2, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.single is not None:
        stage, size = args.single
        print(json.dumps(single(args.config, args.overrides, args.checkpoint, stage, int(size))))
        return
    library = allocator.found()
    env = {k: v for k, v in os.environ.items() if k != allocator.PRELOADED_ENV}
    if library is not None:
        env["LD_PRELOAD"] = str(library)
    results = []
    runs = [("loss", n) for n in args.batch_tokens] + [("decode", n) for n in args.decode_batch]
    for stage, size in runs:
        cmd = [
            sys.executable,
            __file__,
            "--config",
            args.config,
            "--checkpoint",
            args.checkpoint,
            "--single",
            stage,
            str(size),
            *[f"--set={o}" for o in args.overrides],
        ]
        out = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if out.returncode != 0:
            raise SystemExit(f"{stage} {size}: {out.stderr.strip().splitlines()[-1]}")
        results.append(json.loads(out.stdout))
    print(
        json.dumps({"config": args.config, "checkpoint": args.checkpoint, "threads": 1, "results": results}, indent=2)
    )


if __name__ == "__main__":
    main()
