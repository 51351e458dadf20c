"""How the corrections' language guard (`corrections.same_language`) decides on real pairs:
a model translates the sources, then three kinds of correction of its outputs go through the
guards (corrections/guards.py): the reference translation (a good correction: each one held
is a false alarm), the source with one word dropped (the source's language typed or pasted
into the wrong field), and another, unrelated source sentence. Printed as JSON: how many of
each the language guard held, and the good corrections it held, to read.

    python benchmarks/correction_guards.py --checkpoint checkpoints/base/published.pt \\
        --src val.de --ref val.en
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

from transformer_cli.api import open_translator
from transformer_cli.config_corrections import CorrectionsConfig
from transformer_cli.corrections.guards import Guards
from transformer_cli.corrections.store import Correction

SEED = 0  # which word is dropped, which unrelated sentence is taken


def lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--checkpoint", type=Path, required=True)
    ap.add_argument("--src", type=Path, required=True)
    ap.add_argument("--ref", type=Path, required=True)
    ap.add_argument("--beam", type=int, default=5)
    args = ap.parse_args()
    sources, references = lines(args.src), lines(args.ref)
    outputs = open_translator(args.checkpoint, "cpu").translate(sources, beam_size=args.beam)
    guards = Guards(CorrectionsConfig(store="unused"), [], None)

    def held(source: str, output: str, corrected: str) -> bool:
        reasons = guards.reasons(Correction(source, corrected, output=output))
        return any("the source's language" in r for r in reasons)

    rng = random.Random(SEED)
    dropped, unrelated, false_alarms = 0, 0, []
    for source, output, reference in zip(sources, outputs, references):
        assert isinstance(output, str)
        if held(source, output, reference):
            false_alarms.append({"source": source, "output": output, "correction": reference})
        words = source.split()
        del words[rng.randrange(len(words))]
        dropped += held(source, output, " ".join(words))
        unrelated += held(source, output, sources[rng.randrange(len(sources))])
    print(
        json.dumps(
            {
                "pairs": len(sources),
                "reference_held": len(false_alarms),
                "source_with_a_word_dropped_held": dropped,
                "unrelated_source_sentence_held": unrelated,
                "references_held": false_alarms,
            },
            indent=1,
            ensure_ascii=False,
        )
    )


if __name__ == "__main__":
    main()
