"""One model scored on a split's sources as given, lowercased, in capitals and without final
punctuation, side by side, as JSON (the references are always the cased originals).

    python benchmarks/input_variants.py --config base.yaml
    python benchmarks/input_variants.py --config base.yaml --set name=noise --split val --beam 1
    python benchmarks/input_variants.py --config best.yaml --checkpoint checkpoints/best/best.pt

The model is the run's published model (else best.pt), as `tfm translate` picks it, unless
--checkpoint names one. The split's text comes from the run's preprocessed folder.
--recase off scores without the source truecaser (`decode.recase: false`); a model trained
before tfm stored one gets the one its training sources give (what it would carry now).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from transformer_cli.api import open_translator
from transformer_cli.config_loading import load_config
from transformer_cli.data.augment import SOURCE_VARIANTS
from transformer_cli.data.prepared import load_prepared
from transformer_cli.evaluate import score_translations
from transformer_cli.model_source import published_model


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", default="base.yaml")
    ap.add_argument("--set", dest="overrides", action="append", default=[])
    ap.add_argument("--checkpoint", type=Path, help="default: the run's published model")
    ap.add_argument("--split", choices=("val", "test"), default="test")
    ap.add_argument("--beam", type=int, help="beam size (default: the model's decode.beam_size)")
    ap.add_argument("--recase", choices=("on", "off"), default="on")
    ap.add_argument("--limit", type=int, help="score only the first N sentences (a quick look)")
    ap.add_argument("--variants", nargs="+", choices=tuple(SOURCE_VARIANTS), default=list(SOURCE_VARIANTS))
    args = ap.parse_args()
    cfg = load_config(args.config, args.overrides)
    checkpoint = args.checkpoint or published_model(cfg.run_dir, args.config)
    model = open_translator(checkpoint, device="cpu")
    prepared = load_prepared(cfg)
    sources = prepared.text(args.split, cfg.data.src_lang)[: args.limit]
    references = prepared.text(args.split, cfg.data.tgt_lang)[: args.limit]
    options = model.options(beam_size=args.beam, recase=args.recase == "on")
    tokenizers = model.backend.tokenizers
    recaser = "off" if not options.recase else "model" if tokenizers.recaser else "fitted"
    if recaser == "fitted":
        tokenizers.recaser = prepared.tokenizers.recaser
    lowercase_scoring = cfg.tokenizer.lowercase
    out: dict = {
        "checkpoint": str(checkpoint),
        "sha256": model.sha256,
        "split": args.split,
        "beam_size": options.beam_size,
        "recaser": recaser,
        "recaser_entries": len(tokenizers.recaser.spellings) if tokenizers.recaser else 0,
        "n_sentences": len(sources),
        "variants": {},
    }
    for name in args.variants:
        started = time.perf_counter()
        variant = [SOURCE_VARIANTS[name](line) for line in sources]
        hypotheses = [hyps[0].text for hyps in model.translate_n_best(variant, options).translations]
        scores = score_translations(hypotheses, references, lowercase_scoring)
        out["variants"][name] = {
            "bleu": scores.bleu,
            "chrf": scores.chrf,
            "seconds": round(time.perf_counter() - started, 1),
        }
        out["signature"] = scores.signature
    given = out["variants"].get("as_given", {}).get("bleu")
    if given:
        for scores in out["variants"].values():
            scores["of_as_given"] = round(scores["bleu"] / given, 3)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
