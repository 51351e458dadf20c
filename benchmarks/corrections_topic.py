"""What the corrections loop is worth: a model trained without one topic's sentences, then
nights of that topic's held-back pairs added as corrections (`tfm feedback add`, the store
`tfm serve` writes too) and trained on by the nightly line (`tfm train --init-from
published`), scored night by night on the topic's test sentences and on the rest of
test2016, against a retrain from scratch on all the data. Printed as JSON.

The topic is fixed here, before any result: training, validation and test pairs whose English
side names a dog (`TOPIC`: 1,942 of the 29,000 training pairs, 75 of test2016's 1,000).
Validation stays whole (what promotion selects on) and is scored in its topic and rest parts
too (what a choice between nightly settings goes by); test2016 is cut the same way and only
reported. With `--dev-every N`, every Nth topic training pair is kept out of the corrections and
scored as "dev topic": a topic set for that choice larger than validation's 68 pairs, left out
of the scratch retrain's data too (it has what the nights have). `--nights 0` with `--night0`
runs the scratch retrain alone.

    python benchmarks/corrections_topic.py                      # base.yaml, 3 nights (hours on 2 CPU cores)
    python benchmarks/corrections_topic.py --recipe tiny.yaml --nights 2 --limit 2000   # a dry run
    python benchmarks/corrections_topic.py --device cuda        # on a GPU
    python benchmarks/corrections_topic.py --night0 MODEL --weight 8 --night-set train.continued.epochs=1 \
        --night-set train.retrain.min_epochs=1     # other nights from an earlier run's night-0 model

TFM_DATA_SOURCE names Multi30k's folder.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

TFM = [sys.executable, "-m", "transformer_cli"]
TOPIC = re.compile(r"\b(dog|dogs|puppy|puppies)\b", re.IGNORECASE)  # chosen before any result
SPLITS = {"train": "train", "val": "val", "test": "test_2016_flickr"}


def read(folder: Path, stem: str, lang: str) -> list[str]:
    with gzip.open(folder / f"{stem}.{lang}.gz", "rt", encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]


def write(path: Path, lines: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{x}\n" for x in lines), encoding="utf-8")
    return path


def tfm(*args: str) -> tuple[float, float]:
    """Run `tfm ARGS`; its wall and CPU seconds (the children's, as this process sees them)."""
    before, started = resource.getrusage(resource.RUSAGE_CHILDREN), time.monotonic()
    subprocess.run([*TFM, *args, "--quiet"], check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return round(time.monotonic() - started, 1), round(cpu, 1)


def bleu(config: Path, src: Path, ref: Path, beam: int) -> float:
    out = subprocess.run(
        [*TFM, "evaluate", "-c", str(config), "--src", str(src), "--ref", str(ref), "--beam-size", str(beam), "--json"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return float(json.loads(out)["bleu"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--recipe", default="base.yaml")
    ap.add_argument("--nights", type=int, default=3)
    ap.add_argument("--weight", type=int, default=4, help="corrections.weight")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--beam", type=int, default=5)
    ap.add_argument("--limit", type=int, help="use only the first N training pairs (a dry run)")
    ap.add_argument("--work", type=Path, help="keep corpora, runs and logs in this new folder (else a temporary one)")
    ap.add_argument(
        "--night0", type=Path, help="start from this model without the topic (an earlier run's) instead of training it"
    )
    ap.add_argument("--no-scratch", action="store_true", help="skip the retrain from scratch on all data")
    ap.add_argument("--night-set", action="append", default=[], help="KEY=VALUE for the nightly runs (repeatable)")
    ap.add_argument(
        "--dev-every",
        type=int,
        default=0,
        help="keep every Nth topic training pair out of the corrections and score it as 'dev topic'",
    )
    args = ap.parse_args()
    source = os.environ.get("TFM_DATA_SOURCE")
    if not source:
        sys.exit("set TFM_DATA_SOURCE to Multi30k's folder")
    if args.work is not None:
        args.work.mkdir(parents=True)
        print(json.dumps(run(Path(source), args.work.resolve(), args), indent=1))
        return
    with tempfile.TemporaryDirectory() as tmp:
        print(json.dumps(run(Path(source), Path(tmp), args), indent=1))


def run(source: Path, work: Path, args: argparse.Namespace) -> dict[str, Any]:
    data = {s: (read(source, stem, "de"), read(source, stem, "en")) for s, stem in SPLITS.items()}
    if args.limit:
        data["train"] = (data["train"][0][: args.limit], data["train"][1][: args.limit])
    on_topic = {s: [TOPIC.search(en) is not None for en in data[s][1]] for s in data}
    held = [i for i, t in enumerate(on_topic["train"]) if t]
    dev = held[args.dev_every - 1 :: args.dev_every] if args.dev_every else []  # scored, never trained on
    unseen = set(dev)
    held = [i for i in held if i not in unseen]
    for corpus, keep in (("all", lambda s, t: True), ("rest", lambda s, t: s != "train" or not t)):
        for s, stem in SPLITS.items():
            de, en = data[s]
            kept = [i for i, t in enumerate(on_topic[s]) if keep(s, t) and (s != "train" or i not in unseen)]
            write(work / corpus / f"{stem}.de", [de[i] for i in kept])
            write(work / corpus / f"{stem}.en", [en[i] for i in kept])
    parts: dict[str, tuple[Path, Path]] = {}  # "val topic", "test rest", ...
    for split in ("val", "test"):
        for part, wanted in (("topic", True), ("rest", False)):
            idx = [i for i, t in enumerate(on_topic[split]) if t == wanted]
            de, en = data[split]
            parts[f"{split} {part}"] = (
                write(work / split / f"{part}.de", [de[i] for i in idx]),
                write(work / split / f"{part}.en", [en[i] for i in idx]),
            )
    if dev:  # a larger topic set to choose settings by than validation's 68 pairs
        de, en = data["train"]
        parts["dev topic"] = (
            write(work / "dev" / "topic.de", [de[i] for i in dev]),
            write(work / "dev" / "topic.en", [en[i] for i in dev]),
        )
    common = (
        f"data: {{corpus: files, dir: {work / 'data'}}}\n"
        f"train: {{out_dir: {work / 'checkpoints'}, device: {args.device}}}\n"
    )
    configs = {}
    for name, corpus, extra in (
        ("scratch", "all", ""),
        (
            "nightly",
            "rest",
            f"corrections: {{store: {work / 'store'}, weight: {args.weight}, per_client_per_day: 1000000}}\n",
        ),
    ):
        configs[name] = write(
            work / f"{name}.yaml",
            [
                f"extends: {args.recipe}",
                f"name: {name}",
                common.replace("corpus: files", f"corpus: files, source: {work / corpus}") + extra,
            ],
        )
    out: dict[str, Any] = {
        "recipe": args.recipe,
        "topic_pairs": {s: sum(on_topic[s]) for s in on_topic},
        "corrections": len(held),
        "pairs": {s: len(on_topic[s]) for s in on_topic},
    }

    def scores(config: Path) -> dict[str, float]:
        return {part: bleu(config, src, ref, args.beam) for part, (src, ref) in parts.items()}

    night_sets = [x for kv in args.night_set for x in ("--set", kv)]
    out["night_settings"] = args.night_set
    if args.night0 is None:
        wall, cpu = tfm("train", "-c", str(configs["nightly"]))  # the model without the topic
        out["nights"] = [{"night": 0, "corrections": 0, "wall_s": wall, "cpu_s": cpu}]
    else:  # an earlier run's: its wall and CPU time are that run's
        run_dir = work / "checkpoints" / "nightly"
        run_dir.mkdir(parents=True)
        shutil.copyfile(args.night0, run_dir / "published.pt")
        out["nights"] = [{"night": 0, "corrections": 0, "from": str(args.night0)}]
    out["nights"][0]["bleu"] = scores(configs["nightly"])
    print(json.dumps(out["nights"][-1]), file=sys.stderr, flush=True)  # progress, as it comes
    per_night = -(-len(held) // max(args.nights, 1))
    for night in range(1, args.nights + 1):
        batch = held[(night - 1) * per_night : night * per_night]
        fixes = write(work / f"night{night}.tsv", [f"{data['train'][0][i]}\t{data['train'][1][i]}" for i in batch])
        tfm("feedback", "add", str(fixes), "-c", str(configs["nightly"]), "--client", f"night{night}")
        wall, cpu = tfm("train", "-c", str(configs["nightly"]), "--init-from", "published", *night_sets)
        out["nights"].append(
            {
                "night": night,
                "corrections": len(batch),
                "wall_s": wall,
                "cpu_s": cpu,
                "bleu": scores(configs["nightly"]),
            }
        )
        print(json.dumps(out["nights"][-1]), file=sys.stderr, flush=True)
    if args.no_scratch:
        return out
    wall, cpu = tfm("train", "-c", str(configs["scratch"]))
    out["scratch_on_all_data"] = {"wall_s": wall, "cpu_s": cpu, "bleu": scores(configs["scratch"])}
    return out


if __name__ == "__main__":
    main()
