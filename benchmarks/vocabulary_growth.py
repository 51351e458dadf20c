"""How many pieces train.retrain.grow_vocabulary adds on a night without a new topic: a joint
SentencePiece model fitted on a random share of a corpus's training pairs stands for the
published model's, the night's text is all of them, and the rule (new_piece_min_count,
max_new_pieces) picks what a night would append. Printed as JSON, one record per share.

    python benchmarks/vocabulary_growth.py --corpus /work/dev/g16s1234/rest --share 0.96 --share 0.89

--corpus names a folder with train.<src> and train.<tgt> (plain text, one sentence a line).
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

from transformer_cli.config import TokenizerConfig
from transformer_cli.tokenizers.growth import GrowthRule, new_pieces
from transformer_cli.tokenizers.subword import SubwordTokenizer


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", type=Path, required=True)
    ap.add_argument("--langs", nargs=2, default=["de", "en"])
    ap.add_argument("--share", type=float, action="append", required=True, help="the parent's share (repeatable)")
    ap.add_argument("--vocab-size", type=int, default=8000)
    ap.add_argument("--model-type", choices=["bpe", "unigram"], default="bpe")
    ap.add_argument("--min-count", type=int, default=20)
    ap.add_argument("--max-pieces", type=int, default=400)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    src, tgt = (args.corpus / f"train.{lang}" for lang in args.langs)
    sources, targets = src.read_text(encoding="utf-8").splitlines(), tgt.read_text(encoding="utf-8").splitlines()
    settings = TokenizerConfig(kind="sentencepiece", model_type=args.model_type, vocab_size=args.vocab_size)
    lines = sources + targets
    fitted = SubwordTokenizer.train(lines, settings, 2)
    order = list(range(len(sources)))
    random.Random(args.seed).shuffle(order)
    for share in args.share:
        kept = order[: round(share * len(order))]
        parent = SubwordTokenizer.train([sources[i] for i in kept] + [targets[i] for i in kept], settings, 2)
        growth = new_pieces(parent, fitted, lines, GrowthRule(args.min_count, args.max_pieces))
        record = {
            "parent_pairs": len(kept),
            "night_pairs": len(sources),
            "added": len(growth.added),
            "joins": growth.joins,
            "too_rare": growth.too_rare,
            "pieces": list(growth.added[:20]),
        }
        print(json.dumps(record, ensure_ascii=False))


if __name__ == "__main__":
    main()
