"""Resident memory and speed over a stretch of training, per allocator / oneDNN setting (JSON).

bf16 training on the CPU grows its RSS with the number of distinct batch shapes it has seen
(oneDNN keeps per-shape primitives; glibc's allocator fragments). Each variant trains the
config for `--steps` real optimizer steps in its own process and samples the RSS every
`--every` steps; variants are environment settings, so none needs a code change:

    default            glibc malloc, oneDNN's default primitive cache
    jemalloc/tcmalloc  LD_PRELOAD of the Debian library (skipped when it is not installed)
    arena2             MALLOC_ARENA_MAX=2 (fewer glibc arenas)
    onednn64           ONEDNN_PRIMITIVE_CACHE_CAPACITY=64

    python benchmarks/train_memory.py --config base.yaml --steps 400
    python benchmarks/train_memory.py --variants default jemalloc --set train.precision=bf16

Data must be preprocessed (`tfm preprocess -c CONFIG`).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LIBS = Path("/usr/lib") / f"{os.uname().machine}-linux-gnu"
VARIANTS: dict[str, dict[str, str]] = {
    "default": {},
    "jemalloc": {"LD_PRELOAD": str(LIBS / "libjemalloc.so.2")},
    "tcmalloc": {"LD_PRELOAD": str(LIBS / "libtcmalloc_minimal.so.4")},
    "arena2": {"MALLOC_ARENA_MAX": "2"},
    "onednn64": {"ONEDNN_PRIMITIVE_CACHE_CAPACITY": "64"},
}


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def single(config: str, overrides: list[str], steps: int, every: int) -> dict:
    import torch

    from transformer_cli.config import load_config
    from transformer_cli.data.preprocess import load_prepared
    from transformer_cli.device import resolve_device
    from transformer_cli.training.distributed import DistContext
    from transformer_cli.training.loop import Trainer
    from transformer_cli.training.run_dir import RunDir
    from transformer_cli.training.signals import GracefulStop

    cfg = load_config(config, overrides)
    with tempfile.TemporaryDirectory() as tmp:
        trainer = Trainer(cfg, load_prepared(cfg), RunDir(Path(tmp)), resolve_device(cfg.train.device),
                          DistContext(), GracefulStop(), show_progress=False)
        every_epoch = (group for epoch in range(100) for group in trainer.data.steps_from(epoch, 0))
        groups = itertools.islice(every_epoch, steps)
        trainer.net.train()
        samples, tokens = [], 0
        started = time.perf_counter()
        for i, group in enumerate(groups, start=1):
            tokens += trainer.train_step(group)
            if i % every == 0:
                samples.append({"step": i, "rss_mb": round(rss_mb(), 1)})
        seconds = time.perf_counter() - started
    return {"precision": str(trainer.dtype or "fp32").replace("torch.", ""),
            "threads": torch.get_num_threads(), "tokens_per_s": round(tokens / seconds, 1),
            "rss": samples}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", default="base.yaml")
    ap.add_argument("--set", dest="overrides", action="append", default=[])
    ap.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--every", type=int, default=50)
    ap.add_argument("--single", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.single:
        print(json.dumps(single(args.config, args.overrides, args.steps, args.every)))
        return
    results, skipped = [], []
    for name in args.variants:
        extra = VARIANTS[name]
        if "LD_PRELOAD" in extra and not Path(extra["LD_PRELOAD"]).is_file():
            skipped.append(f"{name}: {extra['LD_PRELOAD']} not installed")
            continue
        cmd = [sys.executable, __file__, "--single", "--config", args.config, "--steps", str(args.steps),
               "--every", str(args.every), *[f"--set={o}" for o in args.overrides]]
        out = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **extra})
        if out.returncode != 0:
            raise SystemExit(f"{name}: {out.stderr.strip().splitlines()[-1]}")
        r = json.loads(out.stdout)
        results.append({"variant": name, "env": extra, **r, "final_rss_mb": r["rss"][-1]["rss_mb"],
                        "peak_rss_mb": max(s["rss_mb"] for s in r["rss"])})
    base = results[0]["tokens_per_s"] if results else 1.0
    for r in results:
        r["speed_vs_first"] = round(r["tokens_per_s"] / base, 3)
    print(json.dumps({"config": args.config, "overrides": args.overrides, "steps": args.steps,
                      "results": results, "skipped": skipped}, indent=2))


if __name__ == "__main__":
    main()
