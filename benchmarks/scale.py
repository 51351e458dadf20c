"""tfm on corpora of Multi30k's size up to WMT14's, printed as JSON.

Builds a corpus of N pairs by joining two random Multi30k training pairs per line (sources
with sources, targets with targets: ~26 subwords a side, a WMT-like length; up to 29,000
pairs Multi30k's own pairs unless --joined, the control for sentence length), keeping
Multi30k's validation and test splits, then for each vocabulary size measures with a config
that `extends:` base.yaml:

- `tfm preprocess`: wall time, peak memory of the whole process tree (PSS: pages shared by
  the worker processes counted once; and the main process's RSS; sampled every 0.5 s),
  bytes on disk;
- `tfm train`: seconds from the command to the end of the first optimizer step (its log
  line), and the tree's peak memory until then;
- steady training: target tokens/s over `--steps` steps after `--warmup`, peak RSS (which
  counts the pages of the memory-mapped shards read so far: page cache, shared, reclaimable)
  and the process's own memory at the end (RssAnon) (benchmarks/train_throughput.py);
- the epoch boundary: seconds to plan an epoch, and the wait for epoch 2's first batch once
  epoch 1 has started (as in training, epoch 2 is planned in the background meanwhile).

    python benchmarks/scale.py --pairs 29000 1000000 4500000 --vocab 8000 --work /tmp/scale
    python benchmarks/scale.py --pairs 29000 --joined --vocab 8000 --work /tmp/scale
    python benchmarks/scale.py --pairs 1000000 --vocab 32000 --extends transformer-base.yaml  # on a GPU
    python benchmarks/scale.py --pairs 1000000 --nightly checkpoints/base/published.pt

--nightly PARENT measures instead what a nightly retrain on a changed corpus costs before it
trains: `tfm train` from a fresh data folder to its first optimizer step, from scratch (fit
the tokenizer, encode, start) and continuing PARENT (`--init-from`: encode with its
tokenizer, load it, start), side by side, with the peak memory of each.

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
import shutil
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


def build_corpus(source: Path, pairs: int, folder: Path, joined: bool) -> Path:
    """`pairs` joined training pairs (seeded) plus Multi30k's val and test, in `folder`;
    Multi30k's own pairs instead when there are no more of them and not `joined`."""
    if (folder / "done").is_file():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    de, en = (_lines(multi30k_file(source, "train", lang)) for lang in ("de", "en"))
    rng = random.Random(pairs)
    with (
        open(folder / "train.de", "w", encoding="utf-8") as fde,
        open(folder / "train.en", "w", encoding="utf-8") as fen,
    ):
        if pairs <= len(de) and not joined:  # Multi30k itself: the pairs as they are
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


def run_measured(cmd: list[str], log: Path, stop_at: re.Pattern | None = None) -> dict:
    """Run `cmd` (stderr to `log`), sampling its memory every 0.5 s; stop it (SIGTERM) once a
    stderr line matches `stop_at`. Returns wall seconds (to the match, if any), peak tree PSS
    and main RSS."""
    started = time.perf_counter()
    with open(log, "w") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, cwd=ROOT)
    peak_pss = peak_rss = 0.0
    seen = None
    polls = 0
    while proc.poll() is None:
        if polls % 5 == 0:  # reading smaps costs CPU: memory every 0.5 s, the log every 0.1 s
            pss, rss = _memory_mb(proc.pid)
            peak_pss, peak_rss = max(peak_pss, pss), max(peak_rss, rss)
        polls += 1
        if stop_at is not None and seen is None and stop_at.search(log.read_text(errors="replace")):
            seen = time.perf_counter() - started
            proc.terminate()
        time.sleep(0.1)
    wall = time.perf_counter() - started
    last = log.read_text(errors="replace").strip().splitlines()[-1:]
    if stop_at is None and proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed: {last}")
    if stop_at is not None and seen is None:
        raise SystemExit(f"{' '.join(cmd)} never logged {stop_at.pattern!r}: {last}")
    return {
        "wall_s": round(seen if seen is not None else wall, 1),
        "peak_pss_mb": round(peak_pss),
        "peak_main_rss_mb": round(peak_rss),
    }


def write_config(work: Path, corpus: Path, pairs: str, vocab: int, extends: str) -> Path:
    name = f"scale{pairs}v{vocab}" + ("" if extends == "base.yaml" else f"-{Path(extends).stem}")
    path = work / f"{name}.yaml"
    path.write_text(
        f"""extends: {ROOT / "configs" / extends}
data:
  corpus: files
  source: {corpus}
  splits: {{train: train, val: val, test: test}}
  dir: {work / "data"}
tokenizer:
  vocab_size: {vocab}
train:
  out_dir: {work / "runs"}
  valid_bleu: false
""",
        encoding="utf-8",
    )
    return path


def epoch_boundary(config: str, overrides: list[str]) -> dict:
    """In this process, on `config`'s prepared data (base.yaml's noise on): seconds to plan one
    epoch, and the wait for the first batch of epoch 2 once epoch 1 has started (its plan made
    in the background meanwhile, as in training)."""
    from transformer_cli.config_loading import load_config
    from transformer_cli.data.augment import Augmentation
    from transformer_cli.data.loader import TrainingData
    from transformer_cli.data.prepared import load_prepared

    cfg = load_config(config, overrides)
    prepared = load_prepared(cfg)
    data = TrainingData(cfg, prepared.split("train"), Augmentation.from_config(cfg, prepared.tokenizers))
    started = time.perf_counter()
    data.steps(0)
    plan_s = time.perf_counter() - started
    first = data.steps_from(0, 0)
    next(first)  # epoch 1 trains; epoch 2 is being planned in the background
    time.sleep(2 * plan_s + 1)  # (an epoch of this corpus lasts far longer)
    first.close()
    started = time.perf_counter()  # what the loop does at an epoch start
    data.steps(1)
    second = data.steps_from(1, 0)
    next(second)
    wait_s = time.perf_counter() - started
    second.close()
    return {"plan_epoch_s": round(plan_s, 2), "epoch_boundary_wait_s": round(wait_s, 2)}


def du(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def measure(
    work: Path,
    source: Path,
    pairs: int,
    vocab: int,
    steps: int,
    warmup: int,
    joined: bool,
    extends: str,
    overrides: list[str],
) -> dict:
    tag = f"{pairs}j" if joined and pairs <= 29000 else str(pairs)
    corpus = build_corpus(source, pairs, work / f"corpus{tag}", joined)
    config = write_config(work, corpus, tag, vocab, extends)
    tfm = [sys.executable, "-m", "transformer_cli"]
    sets = [f"--set={o}" for o in overrides]
    pre = run_measured([*tfm, "preprocess", "-c", str(config), *sets, "--force", "-q"], work / f"{config.stem}.pre.log")
    data = work / "data" / config.stem
    start = run_measured(
        [*tfm, "train", "-c", str(config), *sets, "--restart"], work / f"{config.stem}.train.log", stop_at=FIRST_STEP
    )
    steady = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "train_throughput.py"),
            "--single",
            "--config",
            str(config),
            *sets,
            "--steps",
            str(steps),
            "--warmup",
            str(warmup),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    if steady.returncode != 0:
        raise SystemExit(steady.stderr.strip().splitlines()[-1])
    speed = json.loads(steady.stdout)
    boundary = subprocess.run(
        [sys.executable, __file__, "--boundary", str(config), *sets], capture_output=True, text=True, cwd=ROOT
    )
    if boundary.returncode != 0:
        raise SystemExit(boundary.stderr.strip().splitlines()[-1])
    manifest = json.loads((data / "manifest.json").read_text())
    return {
        "config": str(config),
        "overrides": overrides,
        "pairs": pairs,
        "joined": joined or pairs > 29000,
        "vocab_size": vocab,
        "kept_train_pairs": manifest["splits"]["train"]["pairs"],
        "shards": len(manifest["shards"]["train"]),
        "preprocess": {**pre, "disk_mb": round(du(data) / 2**20)},
        "train_start": {
            "seconds_to_first_step": start["wall_s"],
            "peak_pss_mb": start["peak_pss_mb"],
            "peak_main_rss_mb": start["peak_main_rss_mb"],
        },
        "train_steady": {
            k: speed[k]
            for k in (
                "tokens_per_s",
                "steps_per_s",
                "peak_rss_mb",
                "rss_anon_mb",
                "precision",
                "threads",
                "data_workers",
                "device",
                "model_tflops_per_s",
                "mfu",
                "peak_gpu_mb",
            )
            if k in speed
        },
        **json.loads(boundary.stdout),
    }


def nightly_start(work: Path, source: Path, pairs: int, vocab: int, parent: Path, overrides: list[str]) -> dict:
    """`tfm train` on a corpus it has not encoded yet, to its first step: from scratch and from
    `parent`, each from a fresh data folder."""
    corpus = build_corpus(source, pairs, work / f"corpus{pairs}", False)
    config = write_config(work, corpus, str(pairs), vocab, "base.yaml")
    tfm = [
        sys.executable,
        "-m",
        "transformer_cli",
        "train",
        "-c",
        str(config),
        *[f"--set={o}" for o in overrides],
        "--restart",
    ]
    out = {"pairs": pairs, "parent": str(parent)}
    for label, extra in (("from_scratch", []), ("continued", ["--init-from", str(parent)])):
        shutil.rmtree(work / "data" / config.stem, ignore_errors=True)
        start = run_measured([*tfm, *extra], work / f"{config.stem}.{label}.log", stop_at=FIRST_STEP)
        out[label] = {
            "seconds_to_first_step": start["wall_s"],
            "peak_pss_mb": start["peak_pss_mb"],
            "peak_main_rss_mb": start["peak_main_rss_mb"],
        }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pairs", type=int, nargs="+", default=[29000, 1_000_000])
    ap.add_argument("--vocab", type=int, nargs="+", default=[8000])
    ap.add_argument("--work", type=Path, default=Path("/tmp/tfm-scale"))
    ap.add_argument(
        "--source",
        type=Path,
        default=os.environ.get("TFM_DATA_SOURCE"),
        help="folder holding Multi30k's files (default: $TFM_DATA_SOURCE)",
    )
    ap.add_argument(
        "--joined",
        action="store_true",
        help="join two pairs per line at every size (Multi30k's own pairs otherwise, up to 29,000)",
    )
    ap.add_argument(
        "--extends",
        default="base.yaml",
        help="the shipped config the measured one extends (e.g. transformer-base.yaml)",
    )
    ap.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        help="config override for every command, e.g. train.batch_tokens=25000 (repeatable)",
    )
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--boundary", help=argparse.SUPPRESS)
    ap.add_argument(
        "--nightly",
        type=Path,
        metavar="PARENT",
        help="measure a nightly start instead: from scratch and continuing PARENT, side by side",
    )
    ap.add_argument("--warmup", type=int, default=5)
    args = ap.parse_args()
    if args.boundary:
        print(json.dumps(epoch_boundary(args.boundary, args.overrides)))
        return
    if args.source is None:
        raise SystemExit("give --source or set TFM_DATA_SOURCE to a folder holding Multi30k")
    args.work.mkdir(parents=True, exist_ok=True)
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), "?")
    results = []
    if args.nightly:
        for pairs in args.pairs:
            results.append(nightly_start(args.work, args.source, pairs, args.vocab[0], args.nightly, args.overrides))
            print(json.dumps(results[-1]), file=sys.stderr, flush=True)
        print(json.dumps({"cpu": cpu, "nightly": results}, indent=2))
        return
    for pairs in args.pairs:
        for vocab in args.vocab:
            results.append(
                measure(
                    args.work,
                    args.source,
                    pairs,
                    vocab,
                    args.steps,
                    args.warmup,
                    args.joined,
                    args.extends,
                    args.overrides,
                )
            )
            print(json.dumps(results[-1]), file=sys.stderr, flush=True)
    print(json.dumps({"cpu": cpu, "cpus": len(os.sched_getaffinity(0)), "results": results}, indent=2))


if __name__ == "__main__":
    main()
