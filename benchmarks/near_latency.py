"""What near-matches cost a server: `tfm serve` of a model on a store of 100,000 accepted
corrections (the 1,554 dog corrections of benchmarks/near_matches.py and Multi30k task 2
captions up to the count), with near-matches on and off (corrections.near_matches.corrections
0), one server at a time, in turns (off, on, off, on): the latency of one-line /translate
requests sent one after another (test2016's lines: its topic lines have near-matches, most of
the rest few or none), and the lines a second answered to 16 connections at once. Printed as
JSON. Run it alone on the machine.

    python benchmarks/near_latency.py --checkpoint N0.pt [--stored 100000] [--lines 300] [--seconds 20] \
        [--work W] [--no-ahead]

With near-matches' keys computed ahead (corrections.near_matches.ahead, the default), the first
"on" turn waits, after its warm-up, until the server's worker has computed the keys of every
stored correction (how long: "keys_ahead"), then measures; `--work W` keeps the store and its
keys for a later run. `--no-ahead` measures keys read on demand.

TFM_DATA_SOURCE names Multi30k's folder; task 2's captions are read from its sibling
multi30k-task2 (or --task2).
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).parent))
from corrections_load import AUTH, Server  # noqa: E402
from near_matches import parts_and_corrections  # noqa: E402

import transformer_cli as tfm  # noqa: E402
from transformer_cli.corrections.store import Correction, CorrectionStore  # noqa: E402
from transformer_cli.inference.near_keys import KeysFile, keys_folder  # noqa: E402


def fill(store: Path, topic: list[tuple[str, str]], task2: Path, n: int) -> int:
    """The topic's corrections, then task 2's captions (German with the English of the same
    image and number) up to `n` corrections; how many were stored."""
    pairs = list(topic)
    for k in range(1, 6):
        with gzip.open(task2 / f"train.{k}.de.gz", "rt") as de, gzip.open(task2 / f"train.{k}.en.gz", "rt") as en:
            pairs += [(d.strip(), e.strip()) for d, e in zip(de, en) if d.strip() and e.strip()]
        if len(pairs) >= n:
            break
    pairs = list(dict.fromkeys(pairs))[:n]
    for start in range(0, len(pairs), 10_000):
        CorrectionStore(store).add(
            [
                Correction(d, e, caller=f"address 10.0.0.{i % 16}")
                for i, (d, e) in enumerate(pairs[start : start + 10_000])
            ]
        )
    return len(pairs)


def one_by_one(url: str, lines: list[str]) -> tuple[list[float], int]:
    """Each line's /translate latency, sent one after another; the answers that drew on corrections."""
    seconds, near = [], 0
    with httpx.Client(timeout=60) as client:
        for line in lines:
            began = time.perf_counter()
            r = client.post(url + "/translate", json={"inputs": line}, headers=AUTH)
            seconds.append(time.perf_counter() - began)
            r.raise_for_status()
            near += "near_matches" in r.json()[0]
    return seconds, near


async def throughput(url: str, lines: list[str], seconds: float, connections: int = 16) -> float:
    """Lines answered a second to `connections` clients sending one line at a time."""
    done, stop = 0, time.monotonic() + seconds

    async def client(i: int) -> None:
        nonlocal done
        async with httpx.AsyncClient(timeout=120) as c:
            j = i
            while time.monotonic() < stop:
                r = await c.post(url + "/translate", json={"inputs": lines[j % len(lines)]}, headers=AUTH)
                r.raise_for_status()
                done += 1
                j += connections

    began = time.monotonic()
    await asyncio.gather(*(client(i) for i in range(connections)))
    return done / (time.monotonic() - began)


def wait_for_keys(checkpoint: Path, store: Path, seconds: float) -> dict[str, Any]:
    """Wait until the server's worker has computed the keys of every accepted correction of the
    store for the model (corrections.near_matches.ahead): how many, and how long it took from
    this call (a later turn of the same model finds them computed)."""
    sha256 = tfm.load(checkpoint, device="cpu").sha256
    keys, wanted = KeysFile(keys_folder(store, sha256)), len(CorrectionStore(store).current())
    began = time.monotonic()
    while len(keys) < wanted and time.monotonic() < began + seconds:
        time.sleep(2)
    return {"computed": len(keys), "of": wanted, "waited_s": round(time.monotonic() - began, 1)}


def turn(
    checkpoint: Path, store: Path, work: Path, on: bool, lines: list[str], args: argparse.Namespace
) -> dict[str, Any]:
    server = Server(checkpoint, store, work)
    server.args += ["--set", "serve.max_pending_s=null"]
    if not on:
        server.args += ["--set", "corrections.near_matches.corrections=0"]
    elif not args.ahead:
        server.args += ["--set", "corrections.near_matches.ahead=false"]
    server.start()
    try:
        one_by_one(server.url, lines[:20])  # warm: the model's first batches, the store read and indexed
        ahead = wait_for_keys(checkpoint, store, args.keys_wait_s) if on and args.ahead else None
        latency, near = one_by_one(server.url, lines)
        rate = asyncio.run(throughput(server.url, lines, args.seconds))
    finally:
        server.stop()
    return {
        "near_matches": on,
        "keys_ahead": ahead,
        "started_s": server.started_s[0],
        "p50_ms": round(1000 * statistics.median(latency), 1),
        "p90_ms": round(1000 * statistics.quantiles(latency, n=10)[-1], 1),
        "answers_drawing_on_corrections": near,
        "lines_per_s_16_connections": round(rate, 2),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--checkpoint", type=Path, required=True)
    ap.add_argument("--stored", type=int, default=100_000)
    ap.add_argument("--lines", type=int, default=300, help="test2016 lines: its topic lines first, then the rest")
    ap.add_argument("--seconds", type=float, default=20.0, help="of the 16-connection load, each turn")
    ap.add_argument("--task2", type=Path)
    ap.add_argument("--no-ahead", dest="ahead", action="store_false", help="keys read on demand only")
    ap.add_argument(
        "--keys-wait-s", type=float, default=3600.0, help="the longest wait for the keys computed ahead (first on turn)"
    )
    ap.add_argument("--work", type=Path, help="a folder for the store (kept: its keys too); default: a temporary one")
    args = ap.parse_args()
    source = os.environ.get("TFM_DATA_SOURCE")
    if not source:
        sys.exit("set TFM_DATA_SOURCE to Multi30k's folder")
    parts, topic = parts_and_corrections(Path(source))
    lines = (parts["test topic"][0] + parts["test rest"][0])[: args.lines]
    with tempfile.TemporaryDirectory() as tmp:
        work = args.work or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        if (work / "store").exists():
            stored = len(CorrectionStore(work / "store").current())
        else:
            stored = fill(work / "store", topic, args.task2 or Path(source).parent / "multi30k-task2", args.stored)
        turns = [turn(args.checkpoint, work / "store", work, on, lines, args) for on in (False, True, False, True)]
    off, on = [t for t in turns if not t["near_matches"]], [t for t in turns if t["near_matches"]]
    out = {
        "checkpoint": str(args.checkpoint),
        "stored": stored,
        "lines": len(lines),
        "turns": turns,
        "p50_ratio": round(statistics.mean(t["p50_ms"] for t in on) / statistics.mean(t["p50_ms"] for t in off), 3),
        "throughput_ratio": round(
            statistics.mean(t["lines_per_s_16_connections"] for t in on)
            / statistics.mean(t["lines_per_s_16_connections"] for t in off),
            3,
        ),
    }
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
