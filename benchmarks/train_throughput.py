"""Training throughput of a config on this machine, printed as JSON.

Times real optimizer steps (forward, backward, clipping, Adam) on the config's own batches
from the start of epoch 1's shuffled plan, after a few warm-up steps. Each variant runs in its
own process so its peak memory is its own; variants alternate over `--repeats` rounds.

    python benchmarks/train_throughput.py --config seed.yaml --precision fp32 bf16
    python benchmarks/train_throughput.py --config base.yaml --steps 40 --repeats 3
    python benchmarks/train_throughput.py --config base.yaml --rdrop-alpha 0 5   # R-Drop's cost
    python benchmarks/train_throughput.py --set train.device=cuda --sdpa default cudnn,flash,efficient,math --profile

Data must be preprocessed already (or reachable: `tfm preprocess -c CONFIG` first).
    python benchmarks/train_throughput.py --config base.yaml --data-workers 0 1 2   # loader workers

Output: {"config", "device", "threads", "results": [{"precision", "compile", "rdrop_alpha",
"data_workers", "tokens_per_s", "rss_anon_mb" (own memory at the end, without mapped files),
"steps_per_s", "sentences_per_s", "peak_rss_mb", "model_tflops_per_s" (matrix-product FLOPs
of the steps' padded batches, forward and backward: transformer_cli/model/flops.py),
"peak_tflops"? and "mfu"? (model FLOP utilisation: on a GPU of known peak, or --peak-tflops),
"peak_gpu_mb"?, "sdpa" (the attention kernels allowed), "distinct_shapes" (of the timed batches),
"profile"? (--profile: the ops taking most host time in the timed steps)}, ...],
"speedup_vs_first": {variant: tokens/s ratio to the first}}
"""

from __future__ import annotations

import argparse
import contextlib
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def sdpa_kernels(names: str) -> contextlib.AbstractContextManager:
    """The attention kernels torch's scaled_dot_product_attention may pick, e.g.
    "cudnn,flash,efficient,math" (torch's own choice among all); "default": tfm's (on CUDA every
    one but cuDNN's: transformer_cli/host/device.py's ready_cuda)."""
    if names == "default":
        return contextlib.nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel

    known = {
        "flash": SDPBackend.FLASH_ATTENTION,
        "efficient": SDPBackend.EFFICIENT_ATTENTION,
        "cudnn": SDPBackend.CUDNN_ATTENTION,
        "math": SDPBackend.MATH,
    }
    return sdpa_kernel([known[n] for n in names.split(",")])


def top_ops(profile, n: int = 12) -> list[dict]:
    """The `n` ops of a torch.profiler run that took most host time themselves."""
    rows = sorted(profile.key_averages(), key=lambda e: e.self_cpu_time_total, reverse=True)[:n]
    return [
        {
            "op": e.key,
            "calls": e.count,
            "self_cpu_ms": round(e.self_cpu_time_total / 1e3, 1),
            "self_device_ms": round(getattr(e, "self_device_time_total", 0.0) / 1e3, 1),
        }
        for e in rows
    ]


def measure(
    config: str,
    overrides: list[str],
    steps: int,
    warmup: int,
    peak_tflops: float | None = None,
    sdpa: str = "default",
    profile: bool = False,
) -> dict:
    import torch

    from transformer_cli.config_loading import load_config
    from transformer_cli.data.prepared import load_prepared
    from transformer_cli.host.device import resolve_device
    from transformer_cli.model.flops import training_flops
    from transformer_cli.model.transformer_config import TransformerConfig
    from transformer_cli.training.build import build_trainer
    from transformer_cli.training.distributed import DistContext
    from transformer_cli.training.run_dir import RunDir
    from transformer_cli.training.signals import GracefulStop

    cfg = load_config(config, overrides)
    assert isinstance(cfg.model, TransformerConfig), "FLOPs are counted for the Transformer"
    device = resolve_device(cfg.train.device)
    with tempfile.TemporaryDirectory() as tmp:
        trainer = build_trainer(
            cfg, load_prepared(cfg), RunDir(Path(tmp)), device, DistContext(), GracefulStop(), show_progress=False
        )
        if trainer.data.steps(0) < warmup + steps:
            raise SystemExit(f"only {trainer.data.steps(0)} steps per epoch: lower --steps/--warmup")
        groups = trainer.data.steps_from(0, 0)  # the training loop's own batches, workers and all
        trainer.optimization.net.train()
        profiler = torch.profiler.profile() if profile else contextlib.nullcontext()
        with sdpa_kernels(sdpa):
            for _ in range(warmup):
                trainer.optimization.step(next(groups))[0]
            if device.type == "cuda":
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
            started = time.perf_counter()
            tokens = sentences = flops = 0
            shapes: set[tuple[int, int, int]] = set()
            with profiler:
                for _ in range(steps):  # each step's time includes any wait for its batches
                    group = next(groups)
                    tokens += trainer.optimization.step(group)[0]
                    sentences += sum(len(b.src) for b in group)
                    flops += sum(
                        training_flops(
                            cfg.model, trainer.model.tgt_vocab_size, b.src.size(0), b.src.size(1), b.tgt_in.size(1)
                        )
                        for b in group
                    )
                    shapes.update((b.src.size(0), b.src.size(1), b.tgt_in.size(1)) for b in group)
                float(next(trainer.model.parameters()).sum())  # wait for queued GPU work
            seconds = time.perf_counter() - started
        groups.close()
    with open("/proc/self/status") as f:  # the process's own memory, not the mapped files' pages
        anon_kb = next((int(line.split()[1]) for line in f if line.startswith("RssAnon:")), 0)
    result: dict[str, Any] = {
        "precision": str(trainer.dtype or "fp32").replace("torch.", ""),
        "compile": cfg.train.compile,
        "rdrop_alpha": cfg.train.criterion_options.get("rdrop_alpha", 0.0),
        "data_workers": trainer.data.workers,
        "steps": steps,
        "tokens": tokens,
        "tokens_per_s": round(tokens / seconds, 1),
        "steps_per_s": round(steps / seconds, 3),
        "sentences_per_s": round(sentences / seconds, 1),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "rss_anon_mb": round(anon_kb / 1024, 1),
        "model_tflops_per_s": round(flops / seconds / 1e12, 3),
        "device": str(device),
        "threads": torch.get_num_threads(),
        "sdpa": sdpa,
        "distinct_shapes": len(shapes),
    }
    if profile:
        result["profile"] = top_ops(profiler)
    peak = peak_tflops or device_peak_tflops(device, result["precision"])
    if peak:
        result["peak_tflops"], result["mfu"] = peak, round(flops / seconds / 1e12 / peak, 4)
    if device.type == "cuda":
        result["device"] = torch.cuda.get_device_name(device)
        result["peak_gpu_mb"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
    return result


# Dense peak TFLOP/s from NVIDIA's datasheets (no sparsity), by the name torch reports: bf16 and
# fp16 on the tensor cores; fp32 without TF32, which torch leaves off for matrix products.
PEAK_TFLOPS = {
    "H100 PCIe": {"bfloat16": 756.0, "float16": 756.0, "fp32": 51.2},
    "H100": {"bfloat16": 989.4, "float16": 989.4, "fp32": 66.9},  # SXM (HBM3)
    "H200": {"bfloat16": 989.4, "float16": 989.4, "fp32": 66.9},
    "A100": {"bfloat16": 312.0, "float16": 312.0, "fp32": 19.5},
}


def device_peak_tflops(device, precision: str) -> float | None:
    """The datasheet peak of a known GPU in `precision` (None: unknown, or a CPU)."""
    if device.type != "cuda":
        return None
    import torch

    name = torch.cuda.get_device_name(device)
    known = next((peaks for key, peaks in PEAK_TFLOPS.items() if key in name), None)
    return known.get(precision) if known else None


def label(result: dict) -> str:
    """A variant's name in the ratios, e.g. "bfloat16", "bfloat16+compile", "bfloat16+rdrop5"."""
    name = result["precision"] + ("+compile" if result["compile"] else "")
    name += f"+rdrop{result['rdrop_alpha']:g}" if result["rdrop_alpha"] else ""
    name += f"+sdpa={result['sdpa']}" if result["sdpa"] != "default" else ""
    return name + f"+workers{result['data_workers']}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", default="base.yaml")
    ap.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        help="config override, e.g. train.batch_tokens=6000 (repeatable)",
    )
    ap.add_argument("--precision", nargs="+", default=["auto"], help="fp32 / bf16 / auto, one run each")
    ap.add_argument("--compile", nargs="+", default=["false"], help="false / true, one run each")
    ap.add_argument("--rdrop-alpha", nargs="+", default=["0"], help="train.criterion_options.rdrop_alpha, one run each")
    ap.add_argument(
        "--data-workers", nargs="+", default=["null"], help="train.data_workers, one run each (null: the default)"
    )
    ap.add_argument(
        "--sdpa",
        nargs="+",
        default=["default"],
        help="attention kernels allowed, one run each: default (tfm's choice) or a comma "
        "list of flash, efficient, cudnn, math",
    )
    ap.add_argument("--profile", action="store_true", help="add the ops taking most host time")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=1, help="rounds over all variants (median kept)")
    ap.add_argument(
        "--peak-tflops",
        type=float,
        help="the device's peak in the precision measured, "
        "for MFU (default: the datasheet figure of a known GPU; none on a CPU)",
    )
    ap.add_argument("--single", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.single:
        print(
            json.dumps(
                measure(
                    args.config, args.overrides, args.steps, args.warmup, args.peak_tflops, args.sdpa[0], args.profile
                )
            )
        )
        return
    variants = [
        (p, c, a, w, k)
        for p in args.precision
        for c in args.compile
        for a in args.rdrop_alpha
        for w in args.data_workers
        for k in args.sdpa
    ]
    runs: dict[tuple[str, str, str, str, str], list[dict]] = {v: [] for v in variants}
    for _ in range(args.repeats):
        for precision, compiled, alpha, workers, kernels in variants:
            cmd = [
                sys.executable,
                __file__,
                "--single",
                "--config",
                args.config,
                "--steps",
                str(args.steps),
                "--warmup",
                str(args.warmup),
                "--sdpa",
                kernels,
                *(["--peak-tflops", str(args.peak_tflops)] if args.peak_tflops else []),
                *(["--profile"] if args.profile else []),
                *[f"--set={o}" for o in args.overrides],
                f"--set=train.precision={precision}",
                f"--set=train.compile={compiled}",
                f"--set=train.criterion_options.rdrop_alpha={alpha}",
                f"--set=train.data_workers={workers}",
            ]
            out = subprocess.run(cmd, capture_output=True, text=True)
            if out.returncode != 0:
                raise SystemExit(out.stderr.strip().splitlines()[-1])
            runs[precision, compiled, alpha, workers, kernels].append(json.loads(out.stdout))
    results = []
    for rs in runs.values():
        best = sorted(rs, key=lambda r: r["tokens_per_s"])[len(rs) // 2]  # the median run
        best["tokens_per_s_runs"] = [r["tokens_per_s"] for r in rs]
        results.append(best)
    base = results[0]["tokens_per_s"]
    ratios = {label(r): round(r["tokens_per_s"] / base, 2) for r in results}
    print(
        json.dumps(
            {"config": args.config, "overrides": args.overrides, "results": results, "speedup_vs_first": ratios},
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
