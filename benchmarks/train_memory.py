"""Resident memory and speed over a stretch of training, per allocator setting (JSON).

bf16 training on the CPU under glibc's malloc grows its RSS with the batch shapes it has seen.
Each variant trains the config in its own process for `--steps` optimizer steps
and at least `--seconds` seconds, and records the RSS after steps 25, 50, 100, 200, ... (every
doubling of `--first`) and when `--seconds` have passed; tokens/s over the whole stretch.

    default     what a plain `tfm train` runs on: the library `allocator.found()` names,
                preloaded (mimalloc from the alloc extra where installed), else glibc
    glibc       TFM_ALLOCATOR=system: the C library's malloc, nothing preloaded
    tcmalloc    Debian's libtcmalloc_minimal.so.4 preloaded   } skipped when not installed
    jemalloc    Debian's libjemalloc.so.2 preloaded           } (--lib-dir: another folder)
    glibc-trim  glibc, malloc_trim(0) every --trim-every steps
    glibc-mmap  glibc, GLIBC_TUNABLES mmap_threshold=256 KiB with transparent huge pages
    glibc-arena1  glibc, MALLOC_ARENA_MAX=1
    onednn64    glibc, ONEDNN_PRIMITIVE_CACHE_CAPACITY=64

    python benchmarks/train_memory.py --config base.yaml --steps 200 --seconds 300
    python benchmarks/train_memory.py --variants default glibc glibc-trim --seconds 0

Each result's "growth" is its last sampled RSS over the one at step 50 (past the allocators'
ramp); "flat" says whether that is at most 1.25, the bound the default must keep in bf16:
    python benchmarks/train_memory.py --config base.yaml --variants default glibc --steps 200 --seconds 0

Data must be preprocessed (`tfm preprocess -c CONFIG`).
"""

from __future__ import annotations

import argparse
import ctypes
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from transformer_cli.host import allocator

RAMP_STEPS = 50
FLAT = 1.25  # what docs/results.md calls flat: at most 25% above the settled RSS
SYSTEM_LIBS = Path("/usr/lib") / f"{os.uname().machine}-linux-gnu"
GLIBC = {allocator.ENV: allocator.SYSTEM}
VARIANTS: dict[str, dict[str, str]] = {
    "default": {},
    "glibc": GLIBC,
    "tcmalloc": {"LD_PRELOAD": "libtcmalloc_minimal.so.4"},
    "jemalloc": {"LD_PRELOAD": "libjemalloc.so.2"},
    "glibc-trim": GLIBC,
    "glibc-mmap": {**GLIBC, "GLIBC_TUNABLES": "glibc.malloc.hugetlb=1:glibc.malloc.mmap_threshold=262144"},
    "glibc-arena1": {**GLIBC, "MALLOC_ARENA_MAX": "1"},
    "onednn64": {**GLIBC, "ONEDNN_PRIMITIVE_CACHE_CAPACITY": "64"},
}


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def single(config: str, overrides: list[str], steps: int, seconds: float, first: int, trim_every: int) -> dict:
    import torch

    from transformer_cli.config_loading import load_config
    from transformer_cli.data.prepared import load_prepared
    from transformer_cli.host.device import resolve_device
    from transformer_cli.training.build import build_trainer
    from transformer_cli.training.distributed import DistContext
    from transformer_cli.training.run_dir import RunDir
    from transformer_cli.training.signals import GracefulStop

    cfg = load_config(config, overrides)
    marks = {first * 2**k for k in range(32)}
    with tempfile.TemporaryDirectory() as tmp:
        trainer = build_trainer(
            cfg,
            load_prepared(cfg),
            RunDir(Path(tmp)),
            resolve_device(cfg.train.device),
            DistContext(),
            GracefulStop(),
            show_progress=False,
        )
        every_epoch = (group for epoch in itertools.count() for group in trainer.data.steps_from(epoch, 0))
        trainer.optimization.net.train()
        samples, at_seconds, tokens = [], None, 0
        started = time.perf_counter()
        for i, group in enumerate(every_epoch, start=1):
            tokens += trainer.optimization.step(group)[0]
            if trim_every and i % trim_every == 0:
                ctypes.CDLL(None).malloc_trim(0)
            if i in marks:
                samples.append({"step": i, "rss_mb": round(rss_mb(), 1)})
            elapsed = time.perf_counter() - started
            if at_seconds is None and seconds and elapsed >= seconds:
                at_seconds = {"step": i, "seconds": round(elapsed, 1), "rss_mb": round(rss_mb(), 1)}
            if i >= steps and (at_seconds is not None or not seconds):
                break
        elapsed = time.perf_counter() - started
    return {
        "allocator": allocator.in_use(),
        "precision": str(trainer.dtype or "fp32").replace("torch.", ""),
        "threads": torch.get_num_threads(),
        "steps": i,
        "tokens_per_s": round(tokens / elapsed, 1),
        "rss": samples,
        "rss_at_seconds": at_seconds,
    }


def flatness(samples: list[dict[str, float]]) -> dict[str, float | bool | None]:
    """growth: the last sampled RSS over the first at step RAMP_STEPS or later (the allocators
    settle within ~50 steps; glibc's malloc under bf16 grows well past them); flat: growth <= FLAT."""
    settled = [s["rss_mb"] for s in samples if s["step"] >= RAMP_STEPS]
    if len(settled) < 2:
        return {"growth": None, "flat": None}
    ratio = round(settled[-1] / settled[0], 3)
    return {"growth": ratio, "flat": ratio <= FLAT}


def variant_env(name: str, lib_dir: Path) -> dict[str, str] | None:
    """The environment of a variant, or None when its library is not on this machine."""
    env = dict(VARIANTS[name])
    if name == "default":
        library = allocator.found()
        return {"LD_PRELOAD": str(library)} if library else dict(GLIBC)
    if "LD_PRELOAD" in env:
        path = lib_dir / env["LD_PRELOAD"]
        if not path.is_file():
            return None
        env["LD_PRELOAD"] = str(path)
    return env


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", default="base.yaml")
    ap.add_argument("--set", dest="overrides", action="append", default=[])
    ap.add_argument(
        "--variants", nargs="+", default=["default", "glibc", "tcmalloc", "jemalloc"], choices=list(VARIANTS)
    )
    ap.add_argument("--steps", type=int, default=200, help="at least this many steps")
    ap.add_argument("--seconds", type=float, default=300, help="and at least this long (0: steps only)")
    ap.add_argument("--first", type=int, default=25, help="RSS after this many steps, then at each doubling")
    ap.add_argument("--trim-every", type=int, default=25, help="glibc-trim's period in steps")
    ap.add_argument("--lib-dir", type=Path, default=SYSTEM_LIBS, help="where tcmalloc/jemalloc are looked for")
    ap.add_argument("--single", nargs="?", const="", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.single is not None:
        trim = args.trim_every if args.single == "glibc-trim" else 0
        print(json.dumps(single(args.config, args.overrides, args.steps, args.seconds, args.first, trim)))
        return
    results, skipped = [], []
    for name in args.variants:
        extra = variant_env(name, args.lib_dir)
        if extra is None:
            skipped.append(f"{name}: {args.lib_dir / VARIANTS[name]['LD_PRELOAD']} not installed")
            continue
        env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", allocator.PRELOADED_ENV)}
        cmd = [
            sys.executable,
            __file__,
            f"--single={name}",
            "--config",
            args.config,
            "--steps",
            str(args.steps),
            "--seconds",
            str(args.seconds),
            "--first",
            str(args.first),
            "--trim-every",
            str(args.trim_every),
            *[f"--set={o}" for o in args.overrides],
        ]
        out = subprocess.run(cmd, capture_output=True, text=True, env={**env, **extra})
        if out.returncode != 0:
            raise SystemExit(f"{name}: {out.stderr.strip().splitlines()[-1]}")
        r = json.loads(out.stdout)
        rss = [s["rss_mb"] for s in r["rss"]] + ([r["rss_at_seconds"]["rss_mb"]] if r["rss_at_seconds"] else [])
        results.append({"variant": name, "env": extra, **r, "peak_sampled_rss_mb": max(rss), **flatness(r["rss"])})
    base = next((r["tokens_per_s"] for r in results if r["variant"] == "glibc"), None)
    for r in results:
        r["speed_vs_glibc"] = round(r["tokens_per_s"] / base, 3) if base else None
    print(
        json.dumps(
            {"config": args.config, "overrides": args.overrides, "cpu": _cpu(), "results": results, "skipped": skipped},
            indent=2,
        )
    )


def _cpu() -> str:
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
        return next(x.split(":", 1)[1].strip() for x in lines if x.startswith("model name"))
    except (OSError, StopIteration):
        return "unknown"


if __name__ == "__main__":
    main()
