"""Terms at decode time, measured: a glossary fixed by a rule before any result, then the rate
at which translations use its terms without and with it (decode.glossary), BLEU on the
sentences holding terms and on the rest, and the time per sentence holding terms. Printed as
JSON.

The glossary's rule (`make`): from the training pairs, each German word of 4 letters or more
seen 5 times or more, paired with the English word it co-occurs with most by the Dice
coefficient (at least 0.5, the English word 3 letters or more); of those, the pairs whose
German word stands in a validation or test2016 source whose reference holds the English word
at least twice, and whose English word the model's translation (beam 5) misses in a third of
those sentences or more: terms the model gets wrong often enough to need a glossary.

    python benchmarks/terms.py make --model M.pt --out terms.tsv        # the glossary, once
    python benchmarks/terms.py measure --model M.pt --glossary terms.tsv  # the rates

TFM_DATA_SOURCE names Multi30k's folder.
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import json
import os
import statistics
import time
from collections import Counter
from pathlib import Path
from typing import Any

import sacrebleu

import transformer_cli as tfm
from transformer_cli.corrections.glossary import read_glossary, words

SPLITS = ("val", "test_2016_flickr")


def read(stem: str, lang: str) -> list[str]:
    folder = Path(os.environ["TFM_DATA_SOURCE"])
    with gzip.open(folder / f"{stem}.{lang}.gz", "rt", encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]


def dictionary() -> dict[str, str]:
    """German word -> the English word it co-occurs with most (Dice >= 0.5), from training."""
    de_lines, en_lines = read("train", "de"), read("train", "en")
    de_count, en_count, both = Counter[str](), Counter[str](), Counter[tuple[str, str]]()
    for de, en in zip(de_lines, en_lines, strict=True):
        d = {w for w in words(de) if len(w) >= 4 and w.isalpha()}
        e = {w for w in words(en) if len(w) >= 3 and w.isalpha()}
        de_count.update(d)
        en_count.update(e)
        both.update((x, y) for x in d for y in e)
    best: dict[str, tuple[float, str]] = {}
    for (x, y), n in both.items():
        if de_count[x] < 5:
            continue
        dice = 2 * n / (de_count[x] + en_count[y])
        if dice >= 0.5 and dice > best.get(x, (0.0, ""))[0]:
            best[x] = (dice, y)
    return {x: y for x, (_, y) in best.items()}


def sentences() -> tuple[list[str], list[str]]:
    sources, references = [], []
    for stem in SPLITS:
        sources += read(stem, "de")
        references += read(stem, "en")
    return sources, references


def make(model: Path, out: Path) -> dict[str, Any]:
    pairs = dictionary()
    sources, references = sentences()
    translator = tfm.load(model, device="cpu")
    hyps = translator.translate(sources, beam_size=5)
    seen, missed = Counter[str](), Counter[str]()
    for src, ref, hyp in zip(sources, references, hyps, strict=True):
        ref_words, hyp_words = set(words(ref)), set(words(str(hyp)))
        for x in set(words(src)) & pairs.keys():
            if pairs[x] in ref_words:
                seen[x] += 1
                missed[x] += pairs[x] not in hyp_words
    chosen = sorted(x for x in seen if seen[x] >= 2 and missed[x] * 3 >= seen[x])
    out.write_text("".join(f"{x}\t{pairs[x]}\t{missed[x]} of {seen[x]} missed\n" for x in chosen), encoding="utf-8")
    return {"dictionary": len(pairs), "candidates": len(seen), "terms": len(chosen), "glossary": str(out)}


def measure(model: Path, glossary: Path) -> dict[str, Any]:
    sources, references = sentences()
    terms = read_glossary(glossary)
    held = [i for i, s in enumerate(sources) if terms.matches(s)]
    rest = [i for i in range(len(sources)) if not terms.matches(sources[i])]
    translator = tfm.load(model, device="cpu")
    plain = dataclasses.replace(translator.options(beam_size=5), glossary=None)
    report: dict[str, Any] = {"model": str(model), "glossary": str(glossary), "terms": len(terms)}
    report["sentences_with_terms"], report["sentences_without"] = len(held), len(rest)
    for name, options in (("without", plain), ("with", dataclasses.replace(plain, glossary=str(glossary)))):
        out = translator.translate_n_best(sources, options)
        hyps = [t[0].text for t in out.translations]
        uses = [(t, hyps[i]) for i in held for t in terms.matches(sources[i])]
        report[name] = {
            "term_use_rate": round(sum(t.used_in(h) for t, h in uses) / len(uses), 4),
            "term_occurrences": len(uses),
            "bleu_with_terms": round(_bleu(hyps, references, held), 2),
            "bleu_rest": round(_bleu(hyps, references, rest), 2),
            "placed": sum(u.how == "placed" for line in out.terms for u in line),
            "unplaced": sum(u.how == "unplaced" for line in out.terms for u in line),
        }
    lines = [sources[i] for i in held[:100]]
    without, with_ = _latencies(translator, lines, plain, dataclasses.replace(plain, glossary=str(glossary)))
    report["without"]["seconds_per_sentence_with_terms_p50"] = without
    report["with"]["seconds_per_sentence_with_terms_p50"] = with_
    report["p50_ratio"] = round(with_ / without, 3)
    return report


def _bleu(hyps: list[str], refs: list[str], rows: list[int]) -> float:
    return float(sacrebleu.corpus_bleu([hyps[i] for i in rows], [[refs[i] for i in rows]]).score)


def _latencies(translator: Any, lines: list[str], plain: Any, glossary: Any) -> tuple[float, float]:
    """Median seconds to translate one line alone, without and with the glossary, taken in
    turn line by line (after one warm-up pass of each), so that both see the same machine."""
    for options in (plain, glossary):
        translator.translate_n_best(lines[:10], options)
    times: tuple[list[float], list[float]] = ([], [])
    for line in lines:
        for kept, options in zip(times, (plain, glossary)):
            started = time.perf_counter()
            translator.translate_n_best([line], options)
            kept.append(time.perf_counter() - started)
    return round(statistics.median(times[0]), 4), round(statistics.median(times[1]), 4)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("step", choices=["make", "measure"])
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--out", type=Path, default=Path("terms.tsv"))
    parser.add_argument("--glossary", type=Path, default=Path("terms.tsv"))
    args = parser.parse_args()
    result = make(args.model, args.out) if args.step == "make" else measure(args.model, args.glossary)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
