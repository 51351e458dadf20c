"""tfm's own decoder against its CTranslate2 exports (float32 and int8 by default), side by
side, as JSON.

For each model given: export it once per --quantization (timed), then in a fresh process per
engine (so peak RSS is that engine's alone) translate test2016 greedy and with beam 5 on the
same device, number of threads and batch size, and report sentences/s, peak RSS (and peak GPU
memory of tfm's decoder on a GPU), size on disk, sacreBLEU, and how many outputs are identical
to tfm's own (in fp32).

    python benchmarks/export_speed.py --model base=checkpoints/base/best.pt \\
        --model seed=checkpoints/seed/best.pt --data /path/to/multi30k
    python benchmarks/export_speed.py --model tiny=checkpoints/tiny/best.pt --threads 2
    python benchmarks/export_speed.py --model base=checkpoints/base/best.pt --busy-neighbour
    python benchmarks/export_speed.py --model base=checkpoints/base/best.pt --device cuda \
        --quantization none float16 int8_float16

--data is a folder with test_2016_flickr.{de,en}[.gz] (default: $TFM_DATA_SOURCE).

--busy-neighbour adds a row "beside_busy_neighbour": the float32 export again while a
busy-loop process holds one core (as a retrain beside `tfm serve` does), decoding with one
thread, as tfm now passes `threads`, and with CTranslate2's own default (intra_threads 0,
what tfm passed before: every core, the busy one included).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from transformer_cli.inference.translate import TranslationBackend

NATIVE = "native-fp32"
BEAMS = (1, 5)


def engine_name(quantization: str) -> str:
    """The engine of an export, named by its CTranslate2 weight type: ct2-float32, ct2-int8, ..."""
    from transformer_cli.export.engine import weight_type

    return f"ct2-{weight_type(quantization)}"


def rss_mb() -> float:
    """Current resident set size of this process, MB."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


def worker(engine: str, model: Path, data: Path, threads: int, batch_size: int | None, device: str, out: Path) -> None:
    """Load one engine, translate test2016 greedy and beam 5, write the measurements as JSON."""
    import torch

    from transformer_cli.data.sources import read_parallel
    from transformer_cli.evaluate import score_translations

    if threads:  # 0: each engine's own default
        torch.set_num_threads(threads)
    sources, references = read_parallel(*(_test_file(data, lang) for lang in ("de", "en")))
    before = rss_mb()
    started = time.perf_counter()
    translator: TranslationBackend
    if engine == NATIVE:
        from transformer_cli.inference.translate import TorchTranslator

        translator = TorchTranslator.from_checkpoint(model, torch.device(device))
    else:
        from transformer_cli.export.ct2_translator import Ct2Translator

        translator = Ct2Translator(model, device, threads=threads)
    result: dict[str, Any] = {
        "load_s": round(time.perf_counter() - started, 2),
        "rss_after_load_mb": round(rss_mb(), 1),
        "rss_model_mb": round(rss_mb() - before, 1),
    }
    d = translator.decode
    d.batch_size = batch_size or d.batch_size
    translator.translate(sources[: d.batch_size])  # warm-up: first-call allocations, thread pools
    lowercase = translator.tokenizers.tgt.lowercase
    for beam in BEAMS:
        d.beam_size, d.n_best = beam, 1
        started = time.perf_counter()
        hyps = [n_best[0].text for n_best in translator.translate(sources).translations]
        seconds = time.perf_counter() - started
        scores = score_translations(hyps, references, lowercase)
        result[f"beam{beam}"] = {
            "sentences_per_s": round(len(sources) / seconds, 1),
            "bleu": scores.bleu,
            "hypotheses": hyps,
        }
    result["batch_size"] = d.batch_size
    result["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3, 1)
    if engine == NATIVE and device == "cuda":
        result["peak_gpu_mb"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
    result["bleu_signature"] = scores.signature
    out.write_text(json.dumps(result))


def _test_file(data: Path, lang: str) -> Path:
    for name in (f"test_2016_flickr.{lang}", f"test_2016_flickr.{lang}.gz"):
        if (data / name).is_file():
            return data / name
    raise SystemExit(f"{data} has no test_2016_flickr.{lang}[.gz]")


def size_mb(path: Path) -> float:
    files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
    return round(sum(p.stat().st_size for p in files) / 1e6, 2)


def run_worker(engine: str, model: Path, args: argparse.Namespace, folder: Path, threads: int | None = None) -> dict:
    out = folder / f"{engine}.json"
    cmd = [
        sys.executable,
        __file__,
        "--worker",
        engine,
        str(model),
        "--data",
        str(args.data),
        "--threads",
        str(args.threads if threads is None else threads),
        "--device",
        args.device,
        "--result",
        str(out),
    ]
    if args.batch_size:
        cmd += ["--batch-size", str(args.batch_size)]
    subprocess.run(cmd, check=True)
    return json.loads(out.read_text())


def same(a: list[str], b: list[str]) -> float:
    return round(100.0 * sum(x == y for x, y in zip(a, b)) / len(a), 2)


def compare(name: str, checkpoint: Path, args: argparse.Namespace, folder: Path) -> dict:
    """Export `checkpoint` once per quantization and measure tfm and each export on it."""
    from transformer_cli.checkpoint import Checkpoint
    from transformer_cli.export.bundle import export_checkpoint

    paths = {NATIVE: checkpoint}
    report: dict = {"checkpoint": str(checkpoint), "export_s": {}}
    for quantization in args.quantization:
        engine = engine_name(quantization)
        paths[engine] = folder / f"{name}.{quantization}"
        read = Checkpoint.read(checkpoint)
        report["export_s"][quantization] = export_checkpoint(read, checkpoint, paths[engine], quantization)[1]
    runs = {engine: run_worker(engine, path, args, folder) for engine, path in paths.items()}
    native = runs[NATIVE]
    hyps = {e: {beam: runs[e][f"beam{beam}"].pop("hypotheses") for beam in BEAMS} for e in runs}
    for engine, run in runs.items():
        run["size_on_disk_mb"] = size_mb(paths[engine])
        for beam in BEAMS:
            key = f"beam{beam}"
            run[key]["identical_to_native_pct"] = same(hyps[engine][beam], hyps[NATIVE][beam])
            run[key]["speedup_vs_native"] = round(run[key]["sentences_per_s"] / native[key]["sentences_per_s"], 2)
            run[key]["bleu_minus_native"] = round(run[key]["bleu"] - native[key]["bleu"], 2)
    report["model.bin_mb"] = {e: size_mb(p / "model.bin") for e, p in paths.items() if e != NATIVE}
    report["engines"] = runs
    if args.busy_neighbour:
        report["beside_busy_neighbour"] = beside_busy_neighbour(paths[engine_name("none")], args, folder)
    return report


def beside_busy_neighbour(export: Path, args: argparse.Namespace, folder: Path) -> dict:
    """The export's speed while another process spins on core 0: with 1 thread, and with
    CTranslate2's default (0), which also puts a thread on the busy core."""
    neighbour = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        os.sched_setaffinity(neighbour.pid, {min(os.sched_getaffinity(0))})
        runs = {
            label: run_worker(engine_name("none"), export, args, folder, threads)
            for label, threads in (("threads=1", 1), ("ctranslate2_default", 0))
        }
    finally:
        neighbour.kill()
        neighbour.wait()
    return {
        label: {f"beam{beam}_sentences_per_s": run[f"beam{beam}"]["sentences_per_s"] for beam in BEAMS}
        for label, run in runs.items()
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--model",
        action="append",
        default=[],
        metavar="NAME=CHECKPOINT",
        help="a tfm checkpoint to compare (repeatable)",
    )
    ap.add_argument(
        "--data",
        type=Path,
        default=os.environ.get("TFM_DATA_SOURCE"),
        help="folder with test_2016_flickr.{de,en}[.gz] (default: $TFM_DATA_SOURCE)",
    )
    ap.add_argument("--threads", type=int, default=2, help="torch and CTranslate2 threads")
    ap.add_argument("--batch-size", type=int, help="sentences per batch (default: the model's decode.batch_size)")
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"), help="where every engine runs")
    ap.add_argument(
        "--quantization",
        nargs="+",
        default=["none", "int8"],
        help="the exports to compare with tfm (tfm export --quantization choices)",
    )
    ap.add_argument(
        "--busy-neighbour",
        action="store_true",
        help="also time the float32 export beside a process busy on one core, with "
        "1 thread and with CTranslate2's default",
    )
    ap.add_argument("--worker", nargs=2, metavar=("ENGINE", "MODEL"), help=argparse.SUPPRESS)
    ap.add_argument("--result", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.data is None:
        ap.error("--data (or $TFM_DATA_SOURCE) must name the Multi30k folder")
    if args.worker:
        worker(args.worker[0], Path(args.worker[1]), args.data, args.threads, args.batch_size, args.device, args.result)
        return
    if not args.model:
        ap.error("give at least one --model NAME=CHECKPOINT")
    if args.busy_neighbour and "none" not in args.quantization:
        ap.error("--busy-neighbour times the float32 export: keep none among --quantization")
    import ctranslate2
    import torch

    result = {
        "threads": args.threads,
        "cpu": _cpu_name(),
        "device": args.device,
        "gpu": torch.cuda.get_device_name() if args.device == "cuda" else None,
        "torch": torch.__version__,
        "ctranslate2": ctranslate2.__version__,
        "models": {},
    }
    with tempfile.TemporaryDirectory(prefix="tfm-export-bench.") as tmp:
        for spec in args.model:
            name, _, path = spec.partition("=")
            result["models"][name] = compare(name, Path(path), args, Path(tmp))
    print(json.dumps(result, indent=2))


def _cpu_name() -> str:
    with open("/proc/cpuinfo") as f:
        return next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "?")


if __name__ == "__main__":
    main()
