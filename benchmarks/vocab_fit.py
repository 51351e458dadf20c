"""What fitting a pairs-making config's tokenizer on the real pairs alone (with tfm's marks
reserved) changes against fitting it on the written-out mixture, as tfm did before issue 51:
base.yaml's joint SentencePiece BPE (8,000), fitted both ways, then the pieces per sentence of
the real pairs, of task 2's captions (the text side of bt.yaml's synthetic pairs) and of
validation. Printed as JSON.

The mixture is approximated by its text sides: the real pairs twice (synthetic.real_weight 2)
and task 2's German and English captions once (the synthetic pairs' text sides; their other
sides, the models' translations, are not made here).

    python benchmarks/vocab_fit.py     # TFM_DATA_SOURCE: Multi30k, task 2 beside it
"""

from __future__ import annotations

import gzip
import json
import os
import sys
import time
from pathlib import Path

from transformer_cli.config_loading import load_config
from transformer_cli.tokenizers.subword import SubwordTokenizer
from transformer_cli.tokenizers.text_marks import MARKS


def lines(path: Path) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f if line.strip()]


def pieces(tokenizer: SubwordTokenizer, text: list[str]) -> float:
    return round(sum(map(len, tokenizer.encode_batch(text))) / len(text), 3)


def main() -> None:
    source = os.environ.get("TFM_DATA_SOURCE")
    if not source:
        sys.exit("set TFM_DATA_SOURCE to Multi30k's folder (task 2's beside it)")
    task1, task2 = Path(source), Path(source).resolve().parent / "multi30k-task2"
    real = [*lines(task1 / "train.de.gz"), *lines(task1 / "train.en.gz")]
    captions = {lang: [x for i in range(1, 6) for x in lines(task2 / f"train.{i}.{lang}.gz")] for lang in ("de", "en")}
    val = [*lines(task1 / "val.de.gz"), *lines(task1 / "val.en.gz")]
    cfg = load_config("base.yaml").tokenizer
    fitted = {}
    for name, text, reserved in (
        ("real pairs, marks reserved (now)", real, MARKS),
        ("written-out mixture (before)", [*real, *real, *captions["de"], *captions["en"]], ()),
    ):
        started = time.monotonic()
        fitted[name] = (SubwordTokenizer.train(text, cfg, os.cpu_count() or 1, reserved), time.monotonic() - started)
    out = {
        name: {
            "fit_s": round(seconds, 1),
            "pieces_per_sentence": {
                "real pairs": pieces(tokenizer, real),
                "task-2 German": pieces(tokenizer, captions["de"]),
                "task-2 English": pieces(tokenizer, captions["en"]),
                "val": pieces(tokenizer, val),
            },
        }
        for name, (tokenizer, seconds) in fitted.items()
    }
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
