"""Which snapshots to average: a finished run's kept snapshots scored on validation, as JSON.

For a run trained with `train.average_last: N` (and perhaps `train.snapshot_every_steps`),
scores on the validation split (loss, PPL, BLEU, chrF with the run's decode settings):
the last snapshot alone, the average of every kept snapshot, and the average of only the
epoch-end snapshots among them, so "average by steps" and "average by epochs" are compared
on the same run.

    python benchmarks/snapshot_averaging.py --config base.yaml --set name=drop
    python benchmarks/snapshot_averaging.py --config best.yaml --beam 1
    python benchmarks/snapshot_averaging.py --config bt.yaml --beam 1 --last 4 8   # narrower windows too
    python benchmarks/snapshot_averaging.py --config bt.yaml --last 4 --save last_4 avg4.pt  # and keep one
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import tempfile
from pathlib import Path

import torch

from transformer_cli.checkpoint import Checkpoint
from transformer_cli.config_loading import load_config
from transformer_cli.data.prepared import load_prepared
from transformer_cli.evaluate import evaluate_texts
from transformer_cli.inference.translate import TorchTranslator
from transformer_cli.training.averaging import Snapshots, average_state_dicts
from transformer_cli.training.run_dir import RunDir


def score(checkpoint: Checkpoint, sources: list[str], references: list[str], beam: int | None, work: Path) -> dict:
    """Validation loss/PPL/BLEU/chrF of `checkpoint`'s weights."""
    path = work / "candidate.pt"
    checkpoint.write(path)
    translator = TorchTranslator.from_checkpoint(path, torch.device("cpu"))
    if beam is not None:
        translator.decode.beam_size = beam
    report = evaluate_texts(translator, sources, references, "val", str(path), work / "hyps.txt")
    return {
        "valid_loss": report.loss,
        "valid_ppl": report.ppl,
        "bleu": report.bleu,
        "chrf": report.chrf,
        "beam_size": report.beam_size,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", default="best.yaml")
    ap.add_argument("--set", dest="overrides", action="append", default=[])
    ap.add_argument("--beam", type=int, help="beam size (default: the run's decode.beam_size)")
    ap.add_argument(
        "--last",
        type=int,
        nargs="*",
        default=[],
        help="also the average of the last K kept snapshots, for each K given",
    )
    ap.add_argument(
        "--save",
        nargs=2,
        metavar=("CANDIDATE", "PATH"),
        help="write one candidate's averaged checkpoint (e.g. last_4 avg.pt) to score with tfm evaluate",
    )
    args = ap.parse_args()
    cfg = load_config(args.config, args.overrides)
    run = RunDir(cfg.run_dir)
    paths = Snapshots(run.snapshots, cfg.train.average_last).paths()
    if len(paths) < 2:
        raise SystemExit(f"{run.snapshots}: fewer than two snapshots (train with train.average_last > 1)")
    epoch_end_steps = {r.step for r in run.read_metrics() if r.end_of_epoch}
    snapshots = [Checkpoint.read(p) for p in paths]
    steps = [int(p.stem.split("_")[1]) for p in paths]
    prepared = load_prepared(cfg)
    sources, references = (prepared.text("val", lang) for lang in (cfg.data.src_lang, cfg.data.tgt_lang))
    candidates = {
        "last_snapshot": [snapshots[-1]],
        "all_kept": snapshots,
        "epoch_ends_only": [c for c, s in zip(snapshots, steps) if s in epoch_end_steps],
        **{f"last_{k}": snapshots[-k:] for k in args.last if 1 < k < len(snapshots)},
    }
    out: dict = {
        "run": str(run.path),
        "snapshot_steps": steps,
        "epoch_end_steps": sorted(s for s in steps if s in epoch_end_steps),
        "scores": {},
    }
    with tempfile.TemporaryDirectory() as work:
        for name, chosen in candidates.items():
            if not chosen:
                continue
            averaged = dataclasses.replace(chosen[-1], weights=average_state_dicts([c.weights for c in chosen]))
            if args.save and args.save[0] == name:
                averaged.write(Path(args.save[1]))
            out["scores"][name] = {
                "averaged": len(chosen),
                **score(averaged, sources, references, args.beam, Path(work)),
            }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
