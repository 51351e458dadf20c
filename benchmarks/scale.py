"""tfm on corpora of Multi30k's size up to WMT14's, printed as JSON.

Builds a corpus of N pairs by joining two random Multi30k training pairs per line (sources
with sources, targets with targets: ~26 subwords a side, a WMT-like length), keeping
Multi30k's validation and test splits, then for each vocabulary size measures with a config
that `extends:` base.yaml:

- `tfm preprocess`: wall time, peak memory of the whole process tree (PSS: pages shared by
  the worker processes counted once; and the main process's RSS), bytes on disk;
- `tfm train`: seconds from the command to the end of the first optimizer step (its log
  line), and the tree's peak memory until then;
- steady training: target tokens/s over `--steps` steps after `--warmup`, and peak RSS
  (benchmarks/train_throughput.py on the same prepared data).

    python benchmarks/scale.py --pairs 29000 1000000 4500000 --vocab 8000 32000 --work /tmp/scale

Multi30k must be reachable ($TFM_DATA_SOURCE or data.source). Corpora are built once per
size in --work and reused. Runs one command at a time: run it alone on the machine.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIRST_STEP = re.compile(r"first optimizer step done")


def _lines(path: Path) -> list[str]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]


def multi30k_file(source: Path, split: str, lang: str) -> Path:
    stem = {"train": "train", "val": "val", "test": "test_2016_flickr"}[split]
    for name in (f"{stem}.{lang}.gz", f"{stem}.{lang}"):
        if (source / name).is_file():
            return source / name
    raise SystemExit(f"no {stem}.{lang}(.gz) in {source}")


def build_corpus(source: Path, pairs: int, folder: Path) -> Path:
    """`pairs` joined training pairs (seeded) plus Multi30k's val and test, in `folder`."""
    if (folder / "done").is_file():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    de, en = (_lines(multi30k_file(source, "train", lang)) for lang in ("de", "en"))
    rng = random.Random(pairs)
    with open(folder / "train.de", "w", encoding="utf-8") as fde, \
            open(folder / "train.en", "w", encoding="utf-8") as fen:
        if pairs <= len(de):  # Multi30k itself (its size): the pairs as they are
            fde.writelines(f"{x}\n" for x in de[:pairs])
            fen.writelines(f"{x}\n" for x in en[:pairs])
        else:
            for _ in range(pairs):
                i, j = rng.randrange(len(de)), rng.randrange(len(de))
                fde.write(f"{de[i]} {de[j]}\n")
                fen.write(f"{en[i]} {en[j]}\n")
    for split in ("val", "test"):
        for lang in ("de", "en"):
            lines = _lines(multi30k_file(source, split, lang))
            (folder / f"{split}.{lang}").write_text("".join(f"{x}\n" for x in lines), encoding="utf-8")
    (folder / "done").write_text("")
    return folder


def _tree(pid: int) -> list[int]:
    """`pid` and its descendants."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as f:
                    todo += [int(c) for c in f.read().split()]
        except OSError:
            pass
    return out


def _memory_mb(pid: int) -> tuple[float, float]:
    """(PSS of the process tree, RSS of `pid`) in MB."""
    pss = rss = 0.0
    for p in _tree(pid):
        try:
            with open(f"/proc/{p}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Pss:"):
                        pss += int(line.split()[1]) / 1024
                    elif line.startswith("Rss:") and p == pid:
                        rss = int(line.split()[1]) / 1024
        except OSError:
            pass
    return pss, rss


def run_measured(cmd: list[str], stop_at: re.Pattern | None = None) -> dict:
    """Run `cmd`, sampling its memory every 0.1 s; stop it (SIGTERM) once a stderr line
    matches `stop_at`. Returns wall seconds, peak tree PSS and main RSS, and the stderr."""
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            cwd=ROOT)
    os.set_blocking(proc.stderr.fileno(), False)
    peak_pss = peak_rss = 0.0
    err, seen = "", None
    while proc.poll() is None:
        pss, rss = _memory_mb(proc.pid)
        peak_pss, peak_rss = max(peak_pss, pss), max(peak_rss, rss)
        err += proc.stderr.read() or ""
        if stop_at is not None and seen is None and stop_at.search(err):
            seen = time.perf_counter() - started
            proc.terminate()
        time.sleep(0.1)
    err += proc.stderr.read() or ""
    wall = time.perf_counter() - started
    if stop_at is None and proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed: {err.strip().splitlines()[-1:]}")
    if stop_at is not None and seen is None:
        raise SystemExit(f"{' '.join(cmd)} never logged {stop_at.pattern!r}: {err.strip().splitlines()[-1:]}")
    return {"wall_s": round(seen if seen is not None else wall, 1), "peak_pss_mb": round(peak_pss),
            "peak_main_rss_mb": round(peak_rss)}


def write_config(work: Path, corpus: Path, pairs: int, vocab: int) -> Path:
    name = f"scale{pairs}v{vocab}"
    path = work / f"{name}.yaml"
    path.write_text(f"""extends: {ROOT / 'configs' / 'base.yaml'}
data:
  corpus: files
  source: {corpus}
  splits: {{train: train, val: val, test: test}}
  dir: {work / 'data'}
tokenizer:
  vocab_size: {vocab}
train:
  out_dir: {work / 'runs'}
  valid_bleu: false
""", encoding="utf-8")
    return path


def du(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def measure(work: Path, source: Path, pairs: int, vocab: int, steps: int, warmup: int) -> dict:
    corpus = build_corpus(source, pairs, work / f"corpus{pairs}")
    config = write_config(work, corpus, pairs, vocab)
    tfm = [sys.executable, "-m", "transformer_cli"]
    pre = run_measured([*tfm, "preprocess", "-c", str(config), "--force", "-q"])
    data = work / "data" / config.stem
    start = run_measured([*tfm, "train", "-c", str(config), "--restart"], stop_at=FIRST_STEP)
    steady = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "train_throughput.py"), "--single",
                             "--config", str(config), "--steps", str(steps), "--warmup", str(warmup)],
                            capture_output=True, text=True, cwd=ROOT)
    if steady.returncode != 0:
        raise SystemExit(steady.stderr.strip().splitlines()[-1])
    speed = json.loads(steady.stdout)
    manifest = json.loads((data / "manifest.json").read_text())
    return {"pairs": pairs, "vocab_size": vocab, "kept_train_pairs": manifest["splits"]["train"]["pairs"],
            "shards": len(manifest["shards"]["train"]),
            "preprocess": {**pre, "disk_mb": round(du(data) / 2**20)},
            "train_start": {"seconds_to_first_step": start["wall_s"], "peak_pss_mb": start["peak_pss_mb"],
                            "peak_main_rss_mb": start["peak_main_rss_mb"]},
            "train_steady": {k: speed[k] for k in ("tokens_per_s", "steps_per_s", "peak_rss_mb",
                                                   "precision", "threads", "data_workers")}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pairs", type=int, nargs="+", default=[29000, 1_000_000])
    ap.add_argument("--vocab", type=int, nargs="+", default=[8000])
    ap.add_argument("--work", type=Path, default=Path("/tmp/tfm-scale"))
    ap.add_argument("--source", type=Path, default=os.environ.get("TFM_DATA_SOURCE"),
                    help="folder holding Multi30k's files (default: $TFM_DATA_SOURCE)")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    args = ap.parse_args()
    if args.source is None:
        raise SystemExit("give --source or set TFM_DATA_SOURCE to a folder holding Multi30k")
    args.work.mkdir(parents=True, exist_ok=True)
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), "?")
    results = []
    for pairs in args.pairs:
        for vocab in args.vocab:
            results.append(measure(args.work, args.source, pairs, vocab, args.steps, args.warmup))
            print(json.dumps(results[-1]), file=sys.stderr, flush=True)
    print(json.dumps({"cpu": cpu, "cpus": len(os.sched_getaffinity(0)), "results": results}, indent=2))


if __name__ == "__main__":
    main()
