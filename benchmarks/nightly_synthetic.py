"""A night of configs/bt.yaml's recipe, timed: from `tfm train --init-from published` to its first
training step, beside the time its new translations took. Printed as JSON.

Stand-ins keep it to minutes: the teacher (forward) and reverse models are base.yaml's shape
after one training step, and the translation caches start filled with each task-2 caption as
its own "translation" (what is timed is reading and encoding them, not making them).
Then:

    night 1   +1% lines: 1,450 new German and 1,450 new English captions (task 1's, the English
              ones made distinct), translated for real by the stand-in models
    night 2   no new line, but the teacher re-published (trained again, promoted): the policy
              of synthetic.republished (keep; refresh_share 0.05) decides what is translated

Each night's time to the first step is measured from the command's start to the log line
"first optimizer step done" (one-second resolution), with the log's lines saying what each
part of the prepared folder encoded (its new pairs alone, or all of it when its earlier pairs
changed). Run it alone on the machine.

    python benchmarks/nightly_synthetic.py        # TFM_DATA_SOURCE: Multi30k, task 2 beside it
"""

from __future__ import annotations

import gzip
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

TFM = [sys.executable, "-m", "transformer_cli"]


def tfm(*args: str) -> None:
    subprocess.run([*TFM, *args, "--quiet"], check=True)


def write(path: Path, config: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(config))
    return path


def prefill(config: Path) -> None:
    """The config's caches filled with each kept line as its own translation."""
    from transformer_cli.config_loading import load_config
    from transformer_cli.synthetic.directions import directions
    from transformer_cli.synthetic.mixture import (
        cleaned_text,
        evaluation_sentences,
        open_cache,
        open_models,
        real_files,
    )

    cfg = load_config(str(config))
    evaluation = evaluation_sentences(real_files(cfg))
    for d in directions(cfg):
        cache = open_cache(cfg, d, open_models(cfg, d))
        with tempfile.TemporaryDirectory() as tmp:
            text = cleaned_text(cfg, d, Path(tmp), evaluation, None)
            lines = text.path.read_text(encoding="utf-8").splitlines()
            for i in range(0, len(lines), 10_000):
                cache.append(text.keys[i : i + 10_000], lines[i : i + 10_000])


def night(config: Path, work: Path, name: str) -> dict[str, Any]:
    """`tfm train -c config --init-from published`, timed to its first step."""
    started = time.time()
    log = work / f"{name}.log"
    with open(log, "w") as err:
        subprocess.run([*TFM, "train", "-c", str(config), "--init-from", "published"], stderr=err, check=True)
    text = log.read_text()
    first = re.search(r"^(\S+ \S+) first optimizer step done", text, re.MULTILINE)
    assert first is not None, text
    at = datetime.strptime(first.group(1), "%Y-%m-%d %H:%M:%S").timestamp()
    state = json.loads((work / "data" / "btn.synthetic" / "synthetic.json").read_text())["translated"]
    translating = sum(part["seconds"] for part in state.values())
    return {
        "to_first_step_s": round(at - started, 1),
        "translating_s": round(translating, 1),
        "the_rest_s": round(at - started - translating, 1),
        "lines_translated": {k: v["lines"] for k, v in state.items()},
        "policy_lines": [line.split(": ", 1)[1] for line in text.splitlines() if "was replaced" in line],
        "encoding_lines": [
            line.split(" ", 2)[2] for line in text.splitlines() if re.search(r"pairs encoded|encoding it whole", line)
        ],
    }


def main() -> None:
    source = os.environ.get("TFM_DATA_SOURCE")
    if not source:
        sys.exit("set TFM_DATA_SOURCE to Multi30k's folder (task 2's beside it, as multi30k-task2)")
    task2 = Path(source).resolve().parent / "multi30k-task2"
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "text").mkdir()
        for f in task2.glob("train.*.gz"):
            (work / "text" / f.name).write_bytes(f.read_bytes())
        common = {"data": {"dir": str(work / "data"), "source": source}}
        train = {"out_dir": str(work / "checkpoints"), "max_steps": 1, "threads": 2}
        teacher = write(work / "teacher.yaml", {"extends": "base.yaml", "name": "teacher", **common, "train": train})
        reverse = {"extends": "base.yaml", "name": "rev", "train": train}
        reverse["data"] = {**common["data"], "src_lang": "en", "tgt_lang": "de"}
        tfm("train", "-c", str(teacher))
        tfm("train", "-c", str(write(work / "rev.yaml", reverse)))
        bt = {
            "extends": "bt.yaml",
            "name": "btn",
            **common,
            "synthetic": {
                "back_translation": {"text": [str(work / "text")], "model": str(work / "checkpoints/rev/best.pt")},
                "forward_translation": {
                    "text": [str(work / "text")],
                    "teachers": [str(work / "checkpoints/teacher/published.pt")],
                },
                "cache_dir": str(work / "cache"),
            },
            "train": {**train, "max_steps": 2, "valid_every": 1000},
        }
        config = write(work / "btn.yaml", bt)
        prefill(config)
        tfm("train", "-c", str(config))  # the published model the nights continue
        for lang, suffix in (("de", ""), ("en", ", at night.")):  # +1%: task 1's lines, new to task 2
            with gzip.open(Path(source) / f"train.{lang}.gz", "rt", encoding="utf-8") as task1:
                lines = [next(task1).rstrip("\n") for _ in range(1450)]
            new = [line.rstrip(". ") + suffix if suffix else line for line in lines]
            (work / "text" / f"train.6.{lang}").write_text("".join(f"{x}\n" for x in new), encoding="utf-8")
        results = {"night_1_new_lines": night(config, work, "night1")}
        tfm("train", "-c", str(teacher), "--set", "train.seed=7", "--restart", "--promote", "always")
        results["night_2_teacher_republished"] = night(config, work, "night2")
        print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
