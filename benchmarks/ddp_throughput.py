"""Data-parallel training speed on one machine (JSON): N gloo processes of 1 thread each against
one process of N threads accumulating the same batches (the same optimizer steps, as
tests/training/test_ddp.py proves), for a config's first steps.

    python benchmarks/ddp_throughput.py --config base.yaml --procs 2 --steps 60

Both runs take `--warmup` untimed steps first. Data must be preprocessed (`tfm preprocess`).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time


def worker(config: str, overrides: list[str], steps: int, warmup: int) -> None:
    """Under torchrun or alone: time `steps` optimizer steps; rank 0 prints JSON."""
    import torch

    from transformer_cli.config_loading import load_config
    from transformer_cli.data.prepared import load_prepared
    from transformer_cli.training.build import build_trainer
    from transformer_cli.training.distributed import init_distributed, shutdown_distributed
    from transformer_cli.training.run_dir import RunDir
    from transformer_cli.training.signals import GracefulStop

    cfg = load_config(config, overrides)
    ctx, device = init_distributed(torch.device("cpu"))
    trainer = build_trainer(cfg, load_prepared(cfg), RunDir(cfg.run_dir), device, ctx, GracefulStop(), False)
    trainer.optimization.net.train()
    groups = trainer.data.steps_from(0, 0)
    for _ in range(warmup):
        trainer.optimization.step(next(groups))[0]
    ctx.barrier()
    started = time.perf_counter()
    tokens = sum(trainer.optimization.step(next(groups))[0] for _ in range(steps))
    ctx.barrier()
    seconds = time.perf_counter() - started
    total = int(ctx.all_reduce_sum(torch.tensor(tokens)))
    if ctx.is_main:
        print(
            json.dumps(
                {
                    "processes": ctx.world_size,
                    "threads_each": torch.get_num_threads(),
                    "precision": str(trainer.dtype or "fp32").replace("torch.", ""),
                    "steps": steps,
                    "seconds": round(seconds, 2),
                    "target_tokens_per_s": round(total / seconds, 1),
                }
            )
        )
    shutdown_distributed()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", default="base.yaml")
    ap.add_argument("--set", dest="overrides", action="append", default=[])
    ap.add_argument("--procs", type=int, default=2)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args.config, args.overrides, args.steps, args.warmup)
        return
    common = [
        __file__,
        "--worker",
        "--config",
        args.config,
        "--steps",
        str(args.steps),
        "--warmup",
        str(args.warmup),
        *[f"--set={o}" for o in args.overrides],
    ]
    runs = {
        "one_process": [
            sys.executable,
            *common,
            f"--set=train.threads={args.procs}",
            f"--set=train.accumulate={args.procs}",
        ],
        "ddp": [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc_per_node",
            str(args.procs),
            *common,
            "--set=train.threads=1",
        ],
    }
    results = {}
    for name, cmd in runs.items():
        out = subprocess.run(cmd, capture_output=True, text=True)
        if out.returncode != 0:
            raise SystemExit(f"{name}: {out.stderr.strip().splitlines()[-1]}")
        results[name] = json.loads(out.stdout.strip().splitlines()[-1])
    results["ddp_vs_one_process"] = round(
        results["ddp"]["target_tokens_per_s"] / results["one_process"]["target_tokens_per_s"], 3
    )
    print(json.dumps({"config": args.config, "overrides": args.overrides, **results}, indent=2))


if __name__ == "__main__":
    main()
