"""Memory and time of the synthetic-corpus path at millions of lines, printed as JSON.

For each size N, builds N lines of monolingual text (Multi30k's English captions repeated with
a number, so that every line is distinct), then measures in a fresh process each:

- cleaning (synthetic/text.clean_text: two streamed passes, one 8-byte key per line kept);
- the translation cache: N translations appended a chunk at a time, as generation does
  (the "translation" is the line itself: the model's cost is not what is measured here), then
  which lines it lacks, and every translation read back in text order;

with each step's wall time and two peaks of the process: its RSS (which counts the pages of
the cache's text that were read through a memory map: file pages the kernel can drop) and its
anonymous memory (RssAnon, sampled every 5 ms: what the process itself holds). The anonymous
peak should grow by a few 8-byte arrays per line (keys, their order), not by the text.

    python benchmarks/synthetic_scale.py --lines 100000 1000000 4000000
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path


def peak_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


class AnonPeak:
    """The highest RssAnon of this process, sampled every 5 ms by a daemon thread."""

    def __init__(self) -> None:
        self.peak_kb = 0
        threading.Thread(target=self._watch, daemon=True).start()

    def _watch(self) -> None:
        while True:
            with open("/proc/self/status") as f:
                for row in f:
                    if row.startswith("RssAnon:"):
                        self.peak_kb = max(self.peak_kb, int(row.split()[1]))
            time.sleep(0.005)

    def mb(self) -> float:
        return round(self.peak_kb / 1024, 1)


def measure(lines: int, source: Path, work: Path) -> dict:
    import numpy as np

    from transformer_cli.data.sources import read_lines
    from transformer_cli.synthetic.cache import TranslationCache
    from transformer_cli.synthetic.corpora import TextFile
    from transformer_cli.synthetic.text import clean_text

    anon = AnonPeak()
    captions = read_lines(source)
    text = work / "text.en"
    with open(text, "w", encoding="utf-8") as f:
        for i in range(lines):
            f.write(f"{captions[i % len(captions)]} ({i})\n")
    del captions
    result: dict = {
        "lines": lines,
        "text_mb": round(text.stat().st_size / 2**20, 1),
        "start_rss_mb": peak_mb(),
        "start_anon_mb": anon.mb(),
    }
    started = time.perf_counter()
    clean = clean_text([TextFile(text, "")], work / "clean.en", set(), 100, None)
    result["clean_s"] = round(time.perf_counter() - started, 1)
    result["after_clean_rss_mb"] = peak_mb()
    result["after_clean_anon_mb"] = anon.mb()
    cache = TranslationCache(work / "cache", {"benchmark": True})
    started = time.perf_counter()
    chunk = 10_000
    with open(clean.path, encoding="utf-8") as f:
        batch: list[str] = []
        for row, line in enumerate(f):
            batch.append(line.rstrip("\n"))
            if len(batch) == chunk:
                cache.append(clean.keys[row + 1 - chunk : row + 1], batch)
                batch = []
        if batch:
            cache.append(clean.keys[len(clean.keys) - len(batch) :], batch)
    result["append_s"] = round(time.perf_counter() - started, 1)
    result["after_append_anon_mb"] = anon.mb()
    started = time.perf_counter()
    missing = int(TranslationCache(work / "cache", {"benchmark": True}).missing(clean.keys).sum())
    result["after_reopen_anon_mb"] = anon.mb()
    read = sum(1 for _ in cache.translations(clean.keys[np.random.default_rng(0).permutation(len(clean.keys))]))
    result.update(
        {
            "missing": missing,
            "read_back": read,
            "lookup_s": round(time.perf_counter() - started, 1),
            "peak_rss_mb": peak_mb(),
            "peak_anon_mb": anon.mb(),
        }
    )
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lines", type=int, nargs="+", default=[100_000, 1_000_000])
    ap.add_argument("--source", type=Path, help="Multi30k's train.en(.gz) (default: $TFM_DATA_SOURCE/train.en.gz)")
    ap.add_argument("--single", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    source = args.source or Path(os.environ.get("TFM_DATA_SOURCE", ".")) / "train.en.gz"
    if args.single:
        with tempfile.TemporaryDirectory() as tmp:
            print(json.dumps(measure(args.single, source, Path(tmp))))
        return
    results = []
    for n in args.lines:  # each size in a process of its own: its peak is its own
        out = subprocess.run(
            [sys.executable, __file__, "--single", str(n), "--source", str(source)],
            capture_output=True,
            text=True,
            check=True,
        )
        results.append(json.loads(out.stdout))
    print(json.dumps({"results": results}, indent=1))


if __name__ == "__main__":
    main()
