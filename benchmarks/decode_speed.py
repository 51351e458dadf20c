"""Decoding speed of a trained checkpoint on a test split, printed as JSON.

Measures, in one run on the current device (after a warm-up translation):
  - cached, batched greedy search over the whole split (sentences/s), at each --batch-size;
  - beam search (default beam 5) over the whole split, likewise;
  - the naive greedy loop (one sentence at a time, whole prefix re-run each step) on the
    first --naive-sentences sentences, and checks it gives the same output as cached greedy;
  - the latency of one `tfm translate "..."` call, model loading included (median of 3).

    python benchmarks/decode_speed.py --config seed.yaml
    python benchmarks/decode_speed.py --checkpoint checkpoints/base/best.pt --beam-size 5 --precision bf16
    python benchmarks/decode_speed.py --device cuda --precision auto --batch-size 1 128 --sentences 300

With several batch sizes, "by_batch_size" holds each one's figures; the top-level figures are
the first one's.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

from transformer_cli.config_loading import load_config
from transformer_cli.config_train import PRECISIONS
from transformer_cli.data.batching import pad_batch
from transformer_cli.data.prepared import load_prepared
from transformer_cli.host.device import autocast, autocast_dtype, resolve_device
from transformer_cli.inference.search import greedy_search, output_limits
from transformer_cli.inference.translate import TorchTranslator

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # the reference loop
from reference_search import greedy_search_uncached  # noqa: E402


def timed(fn):
    started = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - started


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", default="base.yaml")
    ap.add_argument("--set", dest="overrides", action="append", default=[], help="config override")
    ap.add_argument("--checkpoint", type=Path, help="default: the config's run's best.pt")
    ap.add_argument("--split", default="test", choices=["val", "test"])
    ap.add_argument("--sentences", type=int, help="the split's first N sentences (default: all)")
    ap.add_argument("--beam-size", type=int, default=5)
    ap.add_argument("--naive-sentences", type=int, default=100)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--precision", default="fp32", choices=PRECISIONS)
    ap.add_argument(
        "--batch-size",
        type=int,
        nargs="+",
        help="sentences per batch, one measurement each (default: the model's decode.batch_size)",
    )
    ap.add_argument("--no-cli", action="store_true", help="skip the `tfm translate` latency")
    args = ap.parse_args()

    cfg = load_config(args.config, args.overrides)
    checkpoint = args.checkpoint or cfg.run_dir / "best.pt"
    device = resolve_device(args.device)
    dtype = autocast_dtype(device, args.precision)
    translator = TorchTranslator.from_checkpoint(checkpoint, device, dtype=dtype)
    sources = load_prepared(cfg).text(args.split, cfg.data.src_lang)[: args.sentences]
    d = translator.decode
    translator.translate(sources[:64])  # warm-up: first-call allocations, kernels, thread pools
    n, speeds = len(sources), {}
    for batch_size in args.batch_size or [d.batch_size]:
        d.batch_size, d.beam_size = batch_size, 1
        greedy, greedy_s = timed(lambda: translator.translate(sources))
        d.beam_size = args.beam_size
        _, beam_s = timed(lambda: translator.translate(sources))
        speeds[str(batch_size)] = {
            "greedy_sentences_per_s": round(n / greedy_s, 1),
            f"beam{args.beam_size}_sentences_per_s": round(n / beam_s, 1),
        }

    subset, _ = translator.encode_sources(sources[: args.naive_sentences])
    src = pad_batch(subset, translator.tokenizers.src.ids.pad).to(device)
    limits = output_limits(
        torch.tensor([len(s) for s in subset]), d.max_len_a, d.max_len_b, translator.model.config.max_len
    )
    with autocast(device, dtype):
        naive, naive_s = timed(lambda: greedy_search_uncached(translator.model, src, limits))
        cached_subset = greedy_search(translator.model, src, limits)
    identical = [h.tokens for h in naive] == [h.tokens for h in cached_subset]

    m = len(subset)
    first_batch_size, first = next(iter(speeds.items()))
    result = {
        "checkpoint": str(checkpoint),
        "split": args.split,
        "device": str(device),
        "precision": str(dtype or "fp32").replace("torch.", ""),
        "threads": torch.get_num_threads(),
        "sentences": n,
        "batch_size": int(first_batch_size),
        **first,
        "naive_greedy_sentences": m,
        "naive_greedy_sentences_per_s": round(m / naive_s, 2),
        "greedy_speedup_vs_naive": round(first["greedy_sentences_per_s"] / (m / naive_s), 1),
        "naive_equals_cached_greedy": identical,
        "greedy_output_sample": greedy.translations[0][0].text,
    }
    if len(speeds) > 1:
        result["by_batch_size"] = speeds
    if not args.no_cli:
        cmd = [
            sys.executable,
            "-m",
            "transformer_cli",
            "translate",
            "--checkpoint",
            str(checkpoint),
            "--device",
            args.device,
            "--precision",
            args.precision,
            "Ein Mann steht an einem Urinal mit einer Tasse Kaffee.",
        ]
        latencies = []
        for _ in range(3):
            out, seconds = timed(lambda: subprocess.run(cmd, capture_output=True, text=True))
            latencies.append(seconds)
        result["cli_translate_latency_s"] = round(statistics.median(latencies), 2)
        result["cli_translate_output"] = out.stdout.strip()
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
