"""A vocabulary-growing night's data (issue 65), printed as JSON: the prepared folder encoded
again pair by pair for the growth (data/grown_folder.py) against the same folder built whole
with the grown tokenizers, side by side in one process.

A joint BPE tokenizer fitted on Multi30k's training pairs without one topic (--topic: the
pairs that name a dog, "Hund", "dog", by default) stands for the published model's; its growth
is what train.retrain.grow_vocabulary adds from a tokenizer fitted on all of them (the
defaults of new_piece_min_count and max_new_pieces). For each corpus size (benchmarks/scale.py's
corpora: Multi30k's own pairs up to 29,000, two joined pairs a line beyond), the folder is
prepared with the parent's tokenizers and kept; then, --repeats times, alternating which goes
first, the kept folder is put back and `prepare` asked for the grown tokenizers, once pair by
pair (the rule that would choose a whole build switched off) and once whole (`force`: what the
night does without data/grown_folder.py). Reported per size: the medians of both, their ratio
(pair by pair / whole; and each repetition's, side by side), the pairs encoded again (and the
share the rule's sample found), what the rule chooses (grown_folder.WHOLE_BUILD_SHARE), and
train.log's two lines.

    python benchmarks/grown_folder.py --pairs 29000 1000000 --repeats 3 --work /tmp/grown-folder
    python benchmarks/grown_folder.py --pairs 29000 --repeats 3 --topic "Frau|Frauen|woman|women"
    python benchmarks/grown_folder.py --pairs 200000 --repeats 3 --topic "Mann|Männer|man|men"
    python benchmarks/grown_folder.py --pairs 200000 --repeats 3 --max-len 40

(--topic: other growths, more pairs holding their pieces; --max-len 40 leaves a tenth of the
joined pairs out as too long, so the folder's pairs are found among the inputs by their text.)

TFM_DATA_SOURCE names Multi30k's folder. Times are wall seconds of `prepare` (the inputs'
hashes read from the manifest, as on a night), with every CPU the process may use.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import shutil
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scale import _lines, build_corpus, multi30k_file, write_config  # noqa: E402

from transformer_cli.config import TokenizerConfig  # noqa: E402
from transformer_cli.config_loading import load_config  # noqa: E402
from transformer_cli.data import grown_folder  # noqa: E402
from transformer_cli.data.freshness import GivenTokenizers  # noqa: E402
from transformer_cli.data.preprocess import prepare  # noqa: E402
from transformer_cli.tokenizers.growth import GrowthRule, appended, new_pieces, scored  # noqa: E402
from transformer_cli.tokenizers.pair import TokenizerPair  # noqa: E402
from transformer_cli.tokenizers.subword import SubwordTokenizer  # noqa: E402

DOGS = r"Hund|Hunde|Hunden|dog|dogs"
REGREW = re.compile(r"vocabulary grew by (\d+) pieces: (\S+) of (\S+) pairs hold them")
SAMPLED = re.compile(r"held by about (\d+)% of the pairs")


def tokenizers(source: Path, vocab: int, topic: str, work: Path) -> tuple[SubwordTokenizer, SubwordTokenizer]:
    """The parent (fitted without the pairs that name `topic`'s words) and its growth (fitted
    with them), kept in `work`."""
    paths = work / f"parent{_slug(topic)}.model", work / f"grown{_slug(topic)}.model"
    if not all(p.is_file() for p in paths):
        de, en = (_lines(multi30k_file(source, "train", lang)) for lang in ("de", "en"))
        lines = de + en
        words = re.compile(rf"\b({topic})\b", re.IGNORECASE)
        without = [x for d, e in zip(de, en) if not (words.search(d) or words.search(e)) for x in (d, e)]
        settings = TokenizerConfig(kind="sentencepiece", model_type="bpe", vocab_size=vocab)
        parent, fitted = SubwordTokenizer.train(without, settings, 2), SubwordTokenizer.train(lines, settings, 2)
        growth = new_pieces(parent, fitted, lines, GrowthRule(20, 400))
        grown = appended(parent, scored(parent, fitted, growth.added))
        for path, tok in zip(paths, (parent, grown)):
            path.write_bytes(tok.model)
    parent, grown = (SubwordTokenizer(p.read_bytes(), False) for p in paths)
    return parent, grown


def _slug(topic: str) -> str:
    return "" if topic == DOGS else "-" + re.sub(r"\W+", "_", topic)


def given(tok: SubwordTokenizer) -> GivenTokenizers:
    return GivenTokenizers(TokenizerPair(tok, tok, joint=True), {"from": "published", "sha256": "0" * 64})


class Captured(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def measure(config: Path, parent: SubwordTokenizer, grown: SubwordTokenizer, repeats: int, max_len: int) -> dict:
    cfg = load_config(str(config), [f"data.train_max_len={max_len}"])
    kept = cfg.data_dir.with_name(cfg.data_dir.name + ".parent")
    if not kept.is_dir():
        shutil.rmtree(cfg.data_dir, ignore_errors=True)
        prepare(cfg, given=given(parent))
        shutil.copytree(cfg.data_dir, kept, symlinks=True)
    log = Captured()
    logging.getLogger("tfm").addHandler(log)
    logging.getLogger("tfm").setLevel(logging.INFO)
    times: dict[str, list[float]] = {"pair_by_pair": [], "whole": []}
    share = grown_folder.WHOLE_BUILD_SHARE
    for rep in range(repeats):
        for way in ["pair_by_pair", "whole"] if rep % 2 == 0 else ["whole", "pair_by_pair"]:
            shutil.rmtree(cfg.data_dir)
            shutil.copytree(kept, cfg.data_dir, symlinks=True)
            grown_folder.WHOLE_BUILD_SHARE = 1.0  # measured pair by pair, whatever the share
            started = time.perf_counter()
            _, rebuilt = prepare(cfg, given=given(grown), force=way == "whole")
            times[way].append(time.perf_counter() - started)
            grown_folder.WHOLE_BUILD_SHARE = share
            assert rebuilt
    logging.getLogger("tfm").removeHandler(log)
    found = [m for line in log.lines if (m := REGREW.search(line))]
    sampled = [int(m[1]) / 100 for line in log.lines if (m := SAMPLED.search(line))]
    assert found and sampled, "the pair-by-pair path did not run"
    touched, pairs = (int(found[-1][k].replace(",", "")) for k in (2, 3))
    pair_by_pair, whole = (statistics.median(times[w]) for w in ("pair_by_pair", "whole"))
    return {
        "pairs": pairs,
        "added_pieces": int(found[-1][1]),
        "pairs_encoded_again": touched,
        "share_encoded_again": round(touched / pairs, 3),
        "share_sampled": sampled[-1],
        "pair_by_pair_s": round(pair_by_pair, 2),
        "whole_s": round(whole, 2),
        "ratio": round(pair_by_pair / whole, 2),
        "ratio_of_each_repetition": [round(a / b, 2) for a, b in zip(times["pair_by_pair"], times["whole"])],
        "rule_chooses": "whole" if sampled[-1] > share else "pair_by_pair",
        "runs_s": {w: [round(t, 2) for t in ts] for w, ts in times.items()},
        "log": [line for line in log.lines if "vocabulary grew" in line][-2:],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pairs", type=int, nargs="+", default=[29000])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--vocab", type=int, default=8000)
    ap.add_argument("--max-len", type=int, default=100, help="data.train_max_len (base.yaml's: 100)")
    ap.add_argument("--topic", default=DOGS, help="the words of the pairs the parent is fitted without")
    ap.add_argument("--work", type=Path, default=Path("/tmp/grown-folder"))
    args = ap.parse_args()
    source = Path(os.environ["TFM_DATA_SOURCE"])
    args.work.mkdir(parents=True, exist_ok=True)
    parent, grown = tokenizers(source, args.vocab, args.topic, args.work)
    for pairs in args.pairs:
        corpus = build_corpus(source, pairs, args.work / f"corpus{pairs}", joined=False)
        size = args.work / (f"n{pairs}{_slug(args.topic)}" + ("" if args.max_len == 100 else f"-len{args.max_len}"))
        size.mkdir(exist_ok=True)
        config = write_config(size, corpus, str(pairs), args.vocab, "base.yaml")
        record = measure(config, parent, grown, args.repeats, args.max_len)
        print(json.dumps({**record, "train_max_len": args.max_len, "cpus": os.cpu_count()}), flush=True)


if __name__ == "__main__":
    main()
