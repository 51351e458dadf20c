"""Training speed alone and beside a busy neighbour, per thread setting, printed as JSON.

A nightly retrain often shares its machine with a server or another job. This runs the
training-throughput measurement of `train_throughput.py` (real optimizer steps on the config's
own batches) for each thread setting, once on an idle machine and once beside a neighbour: a
process that keeps one core busy with single-threaded matrix products (what a translation
server does under load), at the niceness given by `--neighbour-nice` (19: a background job
that yields to training; 0: a busy server with the same priority as the training, which is
what a `nice`d cron retrain sees too). Variants and conditions alternate over `--repeats`
rounds; the median of each is kept.

    python benchmarks/shared_machine.py --config base.yaml
    python benchmarks/shared_machine.py --config base.yaml --threads 1 2 --wait-policy passive active
    python benchmarks/shared_machine.py --config base.yaml --neighbour-nice 0

Data must be preprocessed (`tfm preprocess -c CONFIG`). Output: {"config", "cpus", "results":
[{"threads", "omp_wait_policy", "alone_tokens_per_s", "beside_neighbour_tokens_per_s",
"kept"}], ...}; "kept" is the share of the idle speed that survives the neighbour.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

THROUGHPUT = Path(__file__).with_name("train_throughput.py")
NEIGHBOUR = ("import torch\ntorch.set_num_threads(1)\na = torch.randn(512, 512)\n"
             "while True:\n    a = torch.tanh(a @ a.T / 512)\n")


def measure(config: str, threads: int, wait_policy: str | None, steps: int, overrides: list[str]) -> float:
    env = dict(os.environ)
    env.pop("OMP_WAIT_POLICY", None)
    if wait_policy:
        env["OMP_WAIT_POLICY"] = wait_policy.upper()
    cmd = [sys.executable, str(THROUGHPUT), "--single", "--config", config, "--steps", str(steps),
           "--warmup", "5", f"--set=train.threads={threads}", *[f"--set={o}" for o in overrides]]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if out.returncode != 0:
        raise SystemExit(out.stderr.strip().splitlines()[-1])
    return json.loads(out.stdout)["tokens_per_s"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", default="base.yaml")
    ap.add_argument("--set", dest="overrides", action="append", default=[])
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--wait-policy", nargs="+", default=["default", "passive"],
                    help="OMP_WAIT_POLICY values (default = unset)")
    ap.add_argument("--neighbour-nice", type=int, default=19, help="the neighbour's niceness")
    ap.add_argument("--steps", type=int, default=25)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    variants = [(t, w) for t in args.threads for w in args.wait_policy]
    runs: dict[tuple[int, str, bool], list[float]] = {}
    for _ in range(args.repeats):
        for busy in (False, True):
            neighbour = (subprocess.Popen(["nice", "-n", str(args.neighbour_nice), sys.executable,
                                           "-c", NEIGHBOUR]) if busy else None)
            try:
                time.sleep(1.0 if busy else 0.0)
                for threads, policy in variants:
                    speed = measure(args.config, threads, None if policy == "default" else policy,
                                    args.steps, args.overrides)
                    runs.setdefault((threads, policy, busy), []).append(speed)
            finally:
                if neighbour is not None:
                    neighbour.kill()
                    neighbour.wait()

    def median(xs: list[float]) -> float:
        return sorted(xs)[len(xs) // 2]

    results = []
    for threads, policy in variants:
        alone, beside = median(runs[threads, policy, False]), median(runs[threads, policy, True])
        results.append({"threads": threads, "omp_wait_policy": policy,
                        "alone_tokens_per_s": alone, "beside_neighbour_tokens_per_s": beside,
                        "kept": round(beside / alone, 2),
                        "runs": {"alone": runs[threads, policy, False],
                                 "beside_neighbour": runs[threads, policy, True]}})
    print(json.dumps({"config": args.config, "overrides": args.overrides,
                      "cpus": len(os.sched_getaffinity(0)), "steps": args.steps,
                      "neighbour": f"nice -n {args.neighbour_nice}, one thread of 512x512 matmuls",
                      "results": results},
                     indent=2))


if __name__ == "__main__":
    main()
