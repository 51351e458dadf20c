"""Near-matches at once: a model trained without one topic (benchmarks/corrections_topic.py's
dog sentences), its held-back topic pairs accepted as corrections, no night yet; each scored
line decoded with the corrections closest to it (corrections/nearby.py, inference/near.py)
against without, at beam 5. Printed as JSON.

The parts are corrections_topic.py's, cut the same way from Multi30k: "dev topic" (every fifth
topic training pair, never a correction: the set to choose settings by), "val topic", "val
rest" and, with --test, test2016's topic and rest (reported, never chosen by).

    python benchmarks/near_matches.py --model N0.pt                       # the default settings
    python benchmarks/near_matches.py --model N0.pt --set weight=0.8 --set reach=1500 --parts "dev topic,val rest"
    python benchmarks/near_matches.py --model N0.pt --test                # the report

TFM_DATA_SOURCE names Multi30k's folder.
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import sacrebleu

from transformer_cli.api import load
from transformer_cli.config_corrections import NearMatchesConfig
from transformer_cli.corrections.correction import Correction
from transformer_cli.corrections.nearby import NearbySources
from transformer_cli.corrections.state import Fold
from transformer_cli.inference.outputs import Example, NearSettings

sys.path.insert(0, str(Path(__file__).parent))
from corrections_topic import SPLITS, TOPIC  # noqa: E402  (the same topic, fixed before any result)


def read(folder: Path, stem: str, lang: str) -> list[str]:
    with gzip.open(folder / f"{stem}.{lang}.gz", "rt", encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]


def parts_and_corrections(source: Path) -> tuple[dict[str, tuple[list[str], list[str]]], list[tuple[str, str]]]:
    """The scored parts (name -> German, English) and the accepted corrections (the topic's
    training pairs but every fifth), as corrections_topic.py --dev-every 5 cuts them."""
    data = {s: (read(source, stem, "de"), read(source, stem, "en")) for s, stem in SPLITS.items()}
    on = {s: [TOPIC.search(en) is not None for en in data[s][1]] for s in data}
    held = [i for i, t in enumerate(on["train"]) if t]
    dev = set(held[4::5])
    de, en = data["train"]
    corrections = [(de[i], en[i]) for i in held if i not in dev]
    parts = {"dev topic": ([de[i] for i in sorted(dev)], [en[i] for i in sorted(dev)])}
    for split in ("val", "test"):
        for part, wanted in (("topic", True), ("rest", False)):
            idx = [i for i, t in enumerate(on[split]) if t == wanted]
            parts[f"{split} {part}"] = ([data[split][0][i] for i in idx], [data[split][1][i] for i in idx])
    return parts, corrections


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True, help="the model without the topic (a checkpoint)")
    ap.add_argument("--beam", type=int, default=5)
    shipped = NearMatchesConfig()
    ap.add_argument("--k", type=int, default=shipped.corrections, help="corrections retrieved a line at most")
    ap.add_argument("--least", type=float, default=shipped.similarity, help="the least similarity of a near-match")
    ap.add_argument("--set", action="append", default=[], help="NearSettings field=value (repeatable)")
    ap.add_argument("--parts", default="dev topic,val topic,val rest")
    ap.add_argument("--test", action="store_true", help="also test2016's topic and rest (the report)")
    ap.add_argument("--without", action="store_true", help="also each part without near-matches")
    args = ap.parse_args()
    source = os.environ.get("TFM_DATA_SOURCE")
    if not source:
        sys.exit("set TFM_DATA_SOURCE to Multi30k's folder")
    given: dict[str, Any] = {k: float(v) for k, v in (kv.split("=", 1) for kv in args.set)}
    settings = dataclasses.replace(NearSettings(), **given)
    settings = dataclasses.replace(settings, neighbours=int(settings.neighbours))
    parts, corrections = parts_and_corrections(Path(source))
    fold = Fold.of(
        Correction(de, en, None, "bench", status="accepted", time=float(i)) for i, (de, en) in enumerate(corrections)
    )
    index = NearbySources()
    index.follow(fold)
    model = load(args.model, device="cpu", threads=2)
    options = model.options(beam_size=args.beam)
    names = [p.strip() for p in args.parts.split(",")] + (["test topic", "test rest"] if args.test else [])
    out: dict[str, Any] = {
        "model": args.model,
        "corrections": len(corrections),
        "k": args.k,
        "least": args.least,
        "settings": dataclasses.asdict(settings),
    }
    for name in names:
        src, ref = parts[name]
        matches = [index.near(line, args.k, args.least) for line in src]
        sources = model.encode(src, options)
        sources.examples = [
            [Example(m.correction.source, m.correction.corrected, m.correction.id) for m in found] for found in matches
        ]
        sources.near = settings
        started = time.perf_counter()
        got = model.translate_encoded(sources, options)
        took = time.perf_counter() - started
        hyp = [t[0].text for t in got.translations]
        row: dict[str, Any] = {
            "lines": len(src),
            "with_near": sum(1 for m in matches if m),
            "drawn_on": sum(1 for n in got.near if n),
            "bleu": round(sacrebleu.corpus_bleu(hyp, [ref]).score, 2),
            "s": round(took, 1),
        }
        if args.without:
            started = time.perf_counter()
            plain = model.translate_encoded(model.encode(src, options), options)
            row["without_s"] = round(time.perf_counter() - started, 1)
            row["without"] = round(sacrebleu.corpus_bleu([t[0].text for t in plain.translations], [ref]).score, 2)
        out[name] = row
        print(json.dumps({name: row}), file=sys.stderr, flush=True)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
