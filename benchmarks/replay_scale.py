"""What a replay night costs at millions of pairs (issue 65), printed as JSON: a corpus of N
joined Multi30k pairs (benchmarks/scale.py's), a parent trained on it for a few steps by the
nightly line itself (`--init-from published` with nothing published yet: from scratch, keeping
its seen set; the costs of a night do not depend on how good its parent is), then NEW pairs
appended to the
corpus's files and one nightly `tfm train --init-from published` with train.retrain.night:
replay, its steps capped at --steps (its first steps are timed; the rest of the night is
projected from them). Reported: the parent's preprocessing, the night's wall time to its
first optimizer step (what it reads, hashes and encodes before it trains: the log's lines say
what was encoded), its seconds a step, the steps its plan holds, and the same projection for
an `epochs` night (train.continued's 4 epochs over every pair), side by side.

    python benchmarks/replay_scale.py --pairs 4500000 --new 45000 --work /tmp/replay-scale

TFM_DATA_SOURCE names Multi30k's folder. Run it alone on the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scale import ROOT, _lines, build_corpus, multi30k_file, write_config  # noqa: E402

TFM = [sys.executable, "-m", "transformer_cli"]
NIGHTLY = [  # the nightly line's settings: replay nights, no scratch retrain called for by count or growth
    *("--set", "train.retrain.night=replay"),
    *("--set", "train.retrain.max_continued_runs=null"),
    *("--set", "train.retrain.max_growth=null"),
]
STAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) ", re.M)


def timed(cmd: list[str], log: Path) -> float:
    started = time.perf_counter()
    with open(log, "w") as err:
        done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=err, cwd=ROOT)
    if done.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed ({done.returncode}): see {log}")
    return round(time.perf_counter() - started, 1)


def append(corpus: Path, source: Path, new: int) -> None:
    de, en = (_lines(multi30k_file(source, "train", lang)) for lang in ("de", "en"))
    rng = random.Random(-new)
    pairs = [(rng.randrange(len(de)), rng.randrange(len(de))) for _ in range(new)]
    with (
        open(corpus / "train.de", "a", encoding="utf-8") as fde,
        open(corpus / "train.en", "a", encoding="utf-8") as fen,
    ):
        fde.writelines(f"{de[i]} {de[j]}\n" for i, j in pairs)
        fen.writelines(f"{en[i]} {en[j]}\n" for i, j in pairs)


def night_figures(log: str) -> dict[str, Any]:
    """From a night's train.log: the lines that say what it did, and its step timing."""
    lines = log.splitlines()

    def first(pattern: str) -> str:
        return next((line for line in lines if re.search(pattern, line)), "")

    def at(line: str) -> float:
        match = STAMP.match(line)
        return time.mktime(time.strptime(match.group(1), "%Y-%m-%d %H:%M:%S")) if match else float("nan")

    started, first_step, finished = (
        at(lines[0]),
        at(first("first optimizer step done")),
        at(first(r"finished \(")),
    )
    plan = first("replay night:") or first("continued training:")
    steps = re.search(r"(\d+) passes of (\d+) steps", plan)
    done = re.search(r"after (\d+) steps", first(r"finished \("))
    return {
        "encoded": first(r"new pairs encoded|rebuilding|encoded"),
        "decision": first("continued training:"),
        "plan": plan,
        "to_first_step_s": first_step - started,
        "steps_done": int(done.group(1)) if done else None,
        "steps_s": finished - first_step,
        "planned_steps": int(steps.group(1)) * int(steps.group(2)) if steps else None,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pairs", type=int, default=4_500_000)
    ap.add_argument("--new", type=int, default=45_000)
    ap.add_argument("--vocab", type=int, default=8000)
    ap.add_argument("--steps", type=int, default=30, help="the night's steps, timed (its plan: projected)")
    ap.add_argument("--work", type=Path, default=Path("/tmp/replay-scale"))
    args = ap.parse_args()
    source = Path(os.environ["TFM_DATA_SOURCE"])
    args.work.mkdir(parents=True, exist_ok=True)
    corpus = build_corpus(source, args.pairs, args.work / f"corpus{args.pairs}", joined=True)
    cfg = write_config(args.work, corpus, str(args.pairs), args.vocab, "base.yaml")  # base.yaml, validation BLEU off
    report: dict[str, Any] = {"pairs": args.pairs, "new": args.new}
    run = args.work / "runs" / cfg.stem
    train = [*TFM, "train", "-c", str(cfg), "--init-from", "published", *NIGHTLY]
    if not (run / "published.pt").is_file():
        report["parent_wall_s"] = timed([*train, "--set", "train.max_steps=20"], args.work / "parent.log")
        append(corpus, source, args.new)
    night = [*train, "--set", f"train.retrain.replay_max_steps={args.steps}"]
    report["night_wall_s"] = timed(night, args.work / "night.log")
    text = (run / "train.log").read_text()
    figures = night_figures(text[text.rfind("\n", 0, text.rfind(" tfm train ")) + 1 :])  # the night's lines
    per_step = figures["steps_s"] / max(1, figures["steps_done"] or 1)
    report |= figures | {"s_per_step": round(per_step, 3)}
    if figures["planned_steps"]:
        report["projected_replay_night_s"] = round(figures["to_first_step_s"] + figures["planned_steps"] * per_step)
    epoch_steps = re.search(r"epoch 1: (\d+) steps", text)  # the parent's: an epoch over every pair
    if epoch_steps:
        report["projected_epochs_night_s"] = round(
            figures["to_first_step_s"] + 4 * int(epoch_steps.group(1)) * per_step
        )
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
