"""How finely each model's tokenizers cut a text: the pieces per sentence of each file (source
files by the source tokenizer, target files by the target one), under the tokenizers each model
translates with. Printed as JSON.

Made for the corrections topic experiment (docs/results.md, "A larger topic set to choose by"):
a model that continues nightly keeps the tokenizers of the data it was first trained on, so a
topic absent then is cut into more pieces than under a retrain's new tokenizers.

    python benchmarks/subword_pieces.py --model NIGHTS/published.pt --model SCRATCH/published.pt \
        --src dev/topic.de --tgt dev/topic.en --src val/rest.de --tgt val/rest.en
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from transformer_cli.model_io import read_model
from transformer_cli.tokenizers.pair import TokenizerPair


def per_sentence(ids: list[list[int]]) -> float:
    return round(sum(map(len, ids)) / max(len(ids), 1), 2)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", type=Path, action="append", required=True, help="a model (repeatable)")
    ap.add_argument("--src", type=Path, action="append", default=[], help="a source-language file (repeatable)")
    ap.add_argument("--tgt", type=Path, action="append", default=[], help="a target-language file (repeatable)")
    args = ap.parse_args()
    texts = {path: path.read_text(encoding="utf-8").splitlines() for path in [*args.src, *args.tgt]}
    out = {}
    for model in args.model:
        pair = TokenizerPair.from_state(read_model(model)[0].tokenizer)
        out[str(model)] = {
            **{f"{path} (source)": per_sentence(pair.src.encode_batch(texts[path])) for path in args.src},
            **{f"{path} (target)": per_sentence(pair.tgt.encode_batch(texts[path])) for path in args.tgt},
        }
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
