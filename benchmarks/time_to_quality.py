"""Wall time until validation BLEU first reaches given levels, printed as JSON.

The decoding behind the BLEU is reported as `valid_decode` (greedy unless the run set
`train.valid_decode: beam`; runs logged before that key existed decoded with their config's
`decode.beam_size`, reported as "not logged").

Either trains a config with validation BLEU switched on (into its own output folder, so no
real run is touched) or reads a run that already logged `valid_bleu`:

    python benchmarks/time_to_quality.py --config base.yaml --valid-every 200
    python benchmarks/time_to_quality.py --run-dir runs/ttq/base

Elapsed time is the run's own `elapsed_s`: wall time of training including validation and
the BLEU decoding itself, summed over sessions.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path


def first_crossings(records: list[dict], levels: list[float]) -> dict[str, dict | None]:
    out: dict[str, dict | None] = {}
    for level in levels:
        hit = next((r for r in records if r.get("valid_bleu", -1) >= level), None)
        out[f"bleu_{level:g}"] = (
            None
            if hit is None
            else {
                "elapsed_s": hit["elapsed_s"],
                "minutes": round(hit["elapsed_s"] / 60, 1),
                "step": hit["step"],
                "epoch": hit["epoch"],
                "valid_bleu": hit["valid_bleu"],
            }
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", help="train this config (with valid_bleu on) and measure it")
    ap.add_argument("--run-dir", type=Path, help="measure an existing run instead")
    ap.add_argument("--valid-every", type=int, default=0, help="also validate every N steps")
    ap.add_argument("--set", dest="overrides", action="append", default=[])
    ap.add_argument("--out-dir", default="runs/ttq", help="where a measured training run goes")
    ap.add_argument("--levels", type=float, nargs="+", default=[30, 35, 38])
    args = ap.parse_args()
    if (args.config is None) == (args.run_dir is None):
        raise SystemExit("give --config or --run-dir")
    run_dir = args.run_dir
    if args.config:
        sets = ["train.valid_decode=greedy", *args.overrides, "train.valid_bleu=true", f"train.out_dir={args.out_dir}"]
        if args.valid_every:
            sets.append(f"train.valid_every={args.valid_every}")
        cmd = [
            sys.executable,
            "-m",
            "transformer_cli",
            "train",
            "-c",
            args.config,
            "--quiet",
            "--promote",
            "never",
            *[x for s in sets for x in ("--set", s)],
        ]
        if subprocess.run(cmd).returncode != 0:
            raise SystemExit("training failed")
        run_dir = Path(args.out_dir) / Path(args.config).stem
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    records = [json.loads(x) for x in lines if x.strip()]
    if not any("valid_bleu" in r for r in records):
        raise SystemExit(f"{run_dir} logged no valid_bleu (train with --set train.valid_bleu=true)")
    best = max(records, key=lambda r: r.get("valid_bleu", -1))
    decodes = sorted({r.get("valid_decode", "not logged") for r in records if "valid_bleu" in r})
    print(
        json.dumps(
            {
                "run": str(run_dir),
                "valid_decode": ", ".join(decodes),
                "crossings": first_crossings(records, args.levels),
                "best_valid_bleu": best["valid_bleu"],
                "at_minutes": round(best["elapsed_s"] / 60, 1),
                "total_minutes": round(records[-1]["elapsed_s"] / 60, 1),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
