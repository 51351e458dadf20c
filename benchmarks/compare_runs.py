"""Learning curves of several runs against wall time: a JSON summary and optionally a PNG.

Per-token perplexity depends on the tokenizer (words vs subwords), so runs are compared on
`valid_word_ppl` (validation NLL per reference word) and, where logged, `valid_bleu` (each
run's `valid_decode` in the legend: greedy, beam N, or "not logged" for runs older than it).

    python benchmarks/compare_runs.py checkpoints/seed checkpoints/base --png docs/curves.png
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def load(run: Path) -> list[dict]:
    return [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines() if x.strip()]


def summary(run: Path, records: list[dict]) -> dict:
    out: dict = {
        "run": str(run),
        "validations": len(records),
        "minutes": round(records[-1]["elapsed_s"] / 60, 1),
        "curve": [
            {
                "epoch": r["epoch"],
                "step": r["step"],
                "minutes": round(r["elapsed_s"] / 60, 2),
                **{k: r[k] for k in ("valid_word_ppl", "valid_ppl", "valid_bleu") if k in r},
            }
            for r in records
        ],
    }
    for key, better in (("valid_word_ppl", min), ("valid_bleu", max)):
        scored = [r for r in records if key in r]
        if scored:
            best = better(scored, key=lambda r: r[key])
            out[f"best_{key}"] = {
                "value": best[key],
                "epoch": best["epoch"],
                "minutes": round(best["elapsed_s"] / 60, 1),
            }
    return out


def plot(runs: dict[str, list[dict]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    for name, records in runs.items():
        minutes = [r["elapsed_s"] / 60 for r in records]
        if all("valid_word_ppl" in r for r in records):
            left.plot(minutes, [r["valid_word_ppl"] for r in records], marker="o", label=name)
        if any("valid_bleu" in r for r in records):
            decode = next(r.get("valid_decode", "not logged") for r in records if "valid_bleu" in r)
            right.plot(
                [m for m, r in zip(minutes, records) if "valid_bleu" in r],
                [r["valid_bleu"] for r in records if "valid_bleu" in r],
                marker="o",
                label=f"{name} ({decode})",
            )
    left.set(xlabel="wall time (minutes)", ylabel="validation perplexity per word", yscale="log")
    right.set(xlabel="wall time (minutes)", ylabel="validation BLEU")
    for ax in (left, right):
        ax.grid(alpha=0.3, which="both")
        ax.legend()
    fig.savefig(path, dpi=110, bbox_inches="tight")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("runs", type=Path, nargs="+", help="run directories (with metrics.jsonl)")
    ap.add_argument("--png", type=Path, help="write the curves here")
    args = ap.parse_args()
    runs = {run.name: load(run) for run in args.runs}
    print(json.dumps([summary(run, runs[run.name]) for run in args.runs], indent=2))
    if args.png:
        plot(runs, args.png)


if __name__ == "__main__":
    main()
