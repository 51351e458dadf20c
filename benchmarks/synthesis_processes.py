"""Forward translation in one process against several sharing the cache, printed as JSON.

A model of base.yaml's shape (one training step on Multi30k: the network's cost per token is a
trained one's, the outputs' lengths are not) translates
N German captions of Multi30k's task 2 (beam 5, as configs/bt.yaml), into a fresh cache each time:

    one      `tfm synthesize` in one process at --threads threads
    shared   `tfm synthesize --nproc-per-node P`, the threads shared out (one each on 2 cores)

Both must make the same corpus (its sha256 is printed); the figure is lines per second of wall
time, side by side in one run. Run it alone on the machine.

    python benchmarks/synthesis_processes.py --lines 10000 --processes 2 --threads 2
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

TFM = [sys.executable, "-m", "transformer_cli"]


def tfm(*args: str) -> None:
    subprocess.run([*TFM, *args, "--quiet"], check=True)


def corpus_sha256(folder: Path) -> str:
    """sha256 of the synthetic folder's pair files (two per direction), in name order."""
    h = hashlib.sha256()
    for path in sorted(p for p in folder.iterdir() if p.suffix in (".de", ".en")):
        h.update(path.read_bytes())
    return h.hexdigest()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lines", type=int, default=2000)
    ap.add_argument("--processes", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2, help="the single process's threads")
    ap.add_argument("--beam", type=int, default=5, help="the teacher's beam (synthetic.forward_translation)")
    args = ap.parse_args()
    source = os.environ.get("TFM_DATA_SOURCE")
    if not source:
        sys.exit("set TFM_DATA_SOURCE to a Multi30k folder (task 2 beside it)")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        base: dict[str, Any] = {
            "extends": "base.yaml",
            "name": "teacher",
            "data": {"dir": str(work / "data"), "source": source},
            "train": {"out_dir": str(work / "checkpoints"), "max_steps": 1, "threads": args.threads},
        }
        (work / "teacher.yaml").write_text(yaml.safe_dump(base))
        tfm("train", "-c", str(work / "teacher.yaml"))
        teacher = work / "checkpoints" / "teacher" / "best.pt"
        results = {}
        for setting, processes in (("one", 1), ("shared", args.processes)):
            cfg = {
                **base,
                "name": f"ft-{setting}",
                "synthetic": {
                    "forward_translation": {
                        "text": ["multi30k-task2"],
                        "teachers": [str(teacher)],
                        "beam_size": args.beam,
                        "max_lines": args.lines,
                    },
                    "real_weight": 1,
                    "cache_dir": str(work / f"cache-{setting}"),
                },
            }
            cfg["train"] = {**base["train"], "threads": args.threads if processes == 1 else "auto"}
            path = work / f"ft-{setting}.yaml"
            path.write_text(yaml.safe_dump(cfg))
            started = time.perf_counter()
            tfm("synthesize", "-c", str(path), "--nproc-per-node", str(processes))
            seconds = time.perf_counter() - started
            folder = work / "data" / f"ft-{setting}.synthetic"
            state = json.loads((folder / "synthetic.json").read_text())["translated"]["forward_translation"]
            results[setting] = {
                "processes": processes,
                "seconds": round(seconds, 1),
                "lines_per_s": round(args.lines / seconds, 2),
                "lines_by_the_main_process": state["lines"],
                "corpus_sha256": corpus_sha256(folder),
            }
        results["speedup"] = round(results["shared"]["lines_per_s"] / results["one"]["lines_per_s"], 3)
        results["same_corpus"] = results["one"]["corpus_sha256"] == results["shared"]["corpus_sha256"]
        print(json.dumps({"lines": args.lines, **results}, indent=1))


if __name__ == "__main__":
    main()
