"""Corrections under load: 16 clients post corrections to `tfm serve` while 16 translate, across
a nightly promotion and a SIGKILL of the server (then started again on the same store).
Counted: corrections acknowledged (200), those missing from the store afterwards (lost), and
whether each acknowledged correction is answered from memory, with the time from its 200 to
the first /translate that answers it so; the POSTs' latency; the seconds from starting the
server to its first 200 (at the start, and after the SIGKILL); a GET /health every 20 ms, whose
slowest answer bounds how long the server's event loop was kept from it (client included).
Printed as JSON.

--stored N fills the store with N corrections before the server starts (the scale the
issue asks for: 100,000); --tsv N adds a file of N corrections with `tfm feedback add` while
the clients post (its seconds, and the POSTs meanwhile wait for one batch of it, not all).
--loop-stall measures the event loop itself instead, in this process: the server's
corrections (serving/corrections.py) on the filled store, 16 clients posting and 16 looking
sources up, and `tfm feedback compact` run meanwhile (which every server then reads whole);
printed: the longest stall of a task that sleeps 2 ms at a time, and the POSTs' latency.

The model is a stand-in unless --checkpoint names one: tiny.yaml trained for one step (what is
measured is the corrections' path, not translation quality). With the stand-in, the promotion
is the nightly line itself, run while the clients post: `tfm train --init-from published` on
the store the server writes, promoting into the file the server serves, which reloads it.
With --checkpoint, the promotion is that file rewritten. Run it alone on the machine.

    python benchmarks/corrections_load.py [--seconds 30] [--checkpoint published.pt]
    python benchmarks/corrections_load.py --stored 100000 --tsv 10000 --checkpoint published.pt
    python benchmarks/corrections_load.py --stored 100000 --loop-stall --checkpoint published.pt
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from transformer_cli.checkpoint import read_payload, write_payload
from transformer_cli.corrections.store import Correction, CorrectionStore

TFM = [sys.executable, "-m", "transformer_cli"]
TOKEN = "benchmark-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
SOURCES = ["Ein Mann fährt Fahrrad.", "Zwei Hunde spielen im Schnee.", "Eine Frau liest ein Buch."]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """`tfm serve` on a fixed port, started (and waited for) and killed at will."""

    def __init__(self, model: Path, store: Path, work: Path):
        self.port, self.work = free_port(), work
        (work / "token").write_text(TOKEN)
        self.args = [
            *TFM,
            "serve",
            "--checkpoint",
            str(model),
            "--port",
            str(self.port),
            "--set",
            f"serve.token_file={work / 'token'}",
            "--set",
            f"corrections.store={store}",
            "--set",
            "corrections.per_minute=100000",
            "--set",
            "corrections.per_client_per_day=1000000",
            "--set",
            "serve.reload_poll_s=0.2",
            "--quiet",
        ]
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = f"http://127.0.0.1:{self.port}"
        self.started_s: list[float] = []  # from each start to its first 200

    def start(self) -> None:
        began = time.monotonic()
        self.proc = subprocess.Popen(self.args, stderr=open(self.work / "serve.log", "ab"))
        while time.monotonic() < began + 120:
            try:
                if httpx.get(self.url + "/health", timeout=1).status_code == 200:
                    self.started_s.append(round(time.monotonic() - began, 2))
                    return
            except httpx.TransportError:
                time.sleep(0.05)
        raise SystemExit("the server did not start: see " + str(self.work / "serve.log"))

    def sha256(self) -> str:
        return str(httpx.get(self.url + "/health", timeout=5).json()["model"]["sha256"])

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(60)


class Counts:
    def __init__(self) -> None:
        self.acked: dict[str, tuple[str, float]] = {}  # id -> (source, time of its 200)
        self.served_after: list[float] = []  # seconds from a 200 to the memory's answer
        self.not_from_memory = 0  # the check after a 200 was answered by the model (200, no from_memory)
        self.unchecked = 0  # the check after a 200 got no answer (the server was down)
        self.translations = 0
        self.refused: dict[str, int] = {}  # status or error -> count
        self.post_s: list[float] = []  # each acknowledged POST's latency
        self.health_s: list[float] = []  # each GET /health's latency

    def refuse(self, what: str) -> None:
        self.refused[what] = self.refused.get(what, 0) + 1


async def poster(server: Server, counts: Counts, i: int, stop: asyncio.Event) -> None:
    n = 0
    async with httpx.AsyncClient(timeout=10) as client:
        while not stop.is_set():
            source = f"Ein Satz {i}-{n} für den Speicher."
            body = {"source": source, "corrected": f"A sentence {i}-{n} for the memory.", "client": f"c{i}"}
            posted = time.monotonic()
            try:
                r = await client.post(server.url + "/corrections", json=body, headers=AUTH)
            except httpx.TransportError:
                counts.refuse("no connection")
                await asyncio.sleep(0.05)
                continue
            if r.status_code != 200:
                counts.refuse(str(r.status_code))
                continue
            acked = time.monotonic()
            counts.post_s.append(acked - posted)
            counts.acked[r.json()["id"]] = (source, acked)
            n += 1
            try:  # the same client asks for it at once: answered from memory?
                answer = await client.post(server.url + "/translate", json={"inputs": source}, headers=AUTH)
            except httpx.TransportError:
                counts.unchecked += 1
                continue
            if answer.status_code != 200:
                counts.refuse(f"check {answer.status_code}")
            elif answer.json()[0].get("from_memory"):
                counts.served_after.append(time.monotonic() - acked)
            else:
                counts.not_from_memory += 1


async def translator(server: Server, counts: Counts, i: int, stop: asyncio.Event) -> None:
    async with httpx.AsyncClient(timeout=30) as client:
        while not stop.is_set():
            try:
                r = await client.post(server.url + "/translate", json={"inputs": SOURCES[i % 3]}, headers=AUTH)
                counts.translations += r.status_code == 200
                if r.status_code != 200:
                    counts.refuse(f"translate {r.status_code}")
            except httpx.TransportError:
                await asyncio.sleep(0.05)


async def prober(server: Server, counts: Counts, stop: asyncio.Event) -> None:
    """GET /health every 20 ms: how late the server answers something that waits on nothing."""
    async with httpx.AsyncClient(timeout=10) as client:
        while not stop.is_set():
            asked = time.monotonic()
            try:
                await client.get(server.url + "/health")
                counts.health_s.append(time.monotonic() - asked)
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.02)


def percentiles(seconds: list[float]) -> list[float | None]:
    """p50, p99 and the most of `seconds`, rounded to the millisecond."""
    s = sorted(seconds)
    return [round(s[int(len(s) * q)], 3) if s else None for q in (0.5, 0.99)] + [round(s[-1], 3) if s else None]


def add_file(config: Path, lines: int, work: Path) -> dict[str, Any]:
    """`tfm feedback add` of a TSV of `lines` new corrections: its seconds and exit status."""
    tsv = work / "file.tsv"
    tsv.write_text("".join(f"Ein Satz {i} aus der Datei .\tA sentence {i} from the file .\n" for i in range(lines)))
    began = time.monotonic()
    done = subprocess.run(
        [*TFM, "feedback", "add", str(tsv), "-c", str(config), "-s", "corrections.per_client_per_day=10000000"],
        capture_output=True,
        text=True,
    )
    return {"lines": lines, "exit": done.returncode, "seconds": round(time.monotonic() - began, 2)}


def nightly(config: Path) -> dict[str, Any]:
    """The nightly line on the stand-in's run, while the clients post: it trains on the
    corrections stored so far and promotes into the served file. What it said and took."""
    started = time.monotonic()
    done = subprocess.run(
        [*TFM, "train", "-c", str(config), "--init-from", "published", "--promote", "always"],
        capture_output=True,
        text=True,
    )
    said = [
        line
        for line in done.stderr.splitlines()
        if any(w in line for w in ("corrections:", "promotion:", "scratch", "continu"))
    ]
    return {"exit": done.returncode, "seconds": round(time.monotonic() - started, 1), "said": said}


def rewrite(model: Path) -> None:
    """A promotion of a model without its run: the file rewritten, the server reloads it."""
    payload = read_payload(model)
    payload["metrics"] = {**payload.get("metrics", {}), "note": "promoted during the benchmark"}
    write_payload(model, {k: v for k, v in payload.items() if k not in ("sha256", "format")})


async def load(server: Server, model: Path, config: Path | None, args: argparse.Namespace) -> dict[str, Any]:
    counts, stop, seconds = Counts(), asyncio.Event(), args.seconds
    tasks = [asyncio.create_task(poster(server, counts, i, stop)) for i in range(args.clients)]
    tasks += [asyncio.create_task(translator(server, counts, i, stop)) for i in range(args.clients)]
    tasks.append(asyncio.create_task(prober(server, counts, stop)))
    feedback = server.work / "feedback.yaml"
    feedback.write_text(f"extends: tiny.yaml\nname: feedback\ncorrections: {{store: {server.work / 'store'}}}\n")
    added = asyncio.create_task(asyncio.to_thread(add_file, feedback, args.tsv, server.work)) if args.tsv else None
    await asyncio.sleep(seconds / 3)
    before = await asyncio.to_thread(server.sha256)
    acked_before_the_night = len(counts.acked)
    night = await asyncio.to_thread(nightly, config) if config is not None else None
    if config is None:
        rewrite(model)
    await asyncio.sleep(seconds / 3)
    served_now = await asyncio.to_thread(server.sha256)
    reloaded = served_now != before and served_now == read_payload(model)["sha256"]
    await asyncio.to_thread(server.kill)
    killed_with = len(counts.acked)
    await asyncio.to_thread(server.start)
    await asyncio.sleep(seconds / 3)
    stop.set()
    await asyncio.gather(*tasks)
    said = {"acknowledged_before_the_night": acked_before_the_night, "night": night, "reloaded_during_load": reloaded}
    said |= {"acknowledged_before_the_kill": killed_with, "file_added": await added if added else None}
    return report(server, counts) | said


def report(server: Server, counts: Counts) -> dict[str, Any]:
    """What the clients saw, and what the store holds afterwards."""
    stored = {c.id for c in CorrectionStore(server.work / "store").corrections()}
    return {
        "acknowledged": len(counts.acked),
        "lost": sum(i not in stored for i in counts.acked),
        "stored": len(stored),
        "translations_answered": counts.translations,
        "refused_or_failed": counts.refused,
        "post_seconds_p50_p99_max": percentiles(counts.post_s),
        "health_seconds_p50_p99_max": percentiles(counts.health_s),
        "seconds_to_serve_at_start_and_after_the_kill": server.started_s,
        "checked_at_once_and_answered_from_memory": len(counts.served_after),
        "checked_at_once_and_answered_by_the_model": counts.not_from_memory,
        "not_checked_the_server_was_down": counts.unchecked,
        "seconds_from_200_to_memory_p50_p99_max": percentiles(counts.served_after),
    }


def prefill(store: Path, n: int) -> None:
    """`n` corrections in the store before the server starts, 10,000 an append, from 16 callers."""
    for start in range(0, n, 10_000):
        CorrectionStore(store).add(
            [
                Correction(
                    f"Ein gespeicherter Satz {i} .", f"A stored sentence {i} .", caller=f"address 10.0.0.{i % 16}"
                )
                for i in range(start, min(n, start + 10_000))
            ]
        )


async def oversleeps(stop: asyncio.Event) -> list[tuple[float, float]]:
    """When and how late each 2 ms sleep of this task woke, until `stop`: the event loop's stalls."""
    late = []
    while not stop.is_set():
        asked = time.perf_counter()
        await asyncio.sleep(0.002)
        late.append((asked, time.perf_counter() - asked - 0.002))
    return late


async def post_here(
    served: Any, translator: Any, i: int, stop: asyncio.Event, post_s: list[tuple[float, float]]
) -> int:
    """One client posting to the corrections of this process (`ServedCorrections.post`)."""
    n = 0
    while not stop.is_set():
        data = json.dumps({"source": f"Ein Satz {i}-{n} .", "corrected": f"A sentence {i}-{n} ."}).encode()

        async def body(data: bytes = data) -> Any:
            yield data

        asked = time.perf_counter()
        await served.post({"content-length": str(len(data))}, body(), f"10.0.1.{i}", translator, 10)
        post_s.append((asked, time.perf_counter() - asked))
        n += 1
    return n


async def look_up(served: Any, i: int, stop: asyncio.Event) -> int:
    """One client looking sources up in the memory of this process, as /translate does (every
    5 ms: a translating client waits for its model between lookups)."""
    n = 0
    while not stop.is_set():
        await served.remembered([f"Ein gespeicherter Satz {n * 16 + i} .", f"Ein Satz {i}-{n} ."])
        await asyncio.sleep(0.005)
        n += 1
    return n


async def stalls(served: Any, translator: Any, work: Path, args: argparse.Namespace) -> dict[str, Any]:
    stop, post_s = asyncio.Event(), list[tuple[float, float]]()
    late = asyncio.create_task(oversleeps(stop))
    tasks = [asyncio.create_task(post_here(served, translator, i, stop, post_s)) for i in range(args.clients)]
    tasks += [asyncio.create_task(look_up(served, i, stop)) for i in range(args.clients)]
    await asyncio.sleep(args.seconds / 3)
    feedback = work / "feedback.yaml"
    feedback.write_text(f"extends: tiny.yaml\nname: feedback\ncorrections: {{store: {work / 'store'}}}\n")
    began = time.perf_counter()
    compact = await asyncio.to_thread(subprocess.run, [*TFM, "feedback", "compact", "-c", str(feedback)])
    compacted = {"exit": compact.returncode, "seconds": round(time.perf_counter() - began, 2)}
    ended = time.perf_counter() + 3  # and the read of the new log that follows it (a POST: its wait)
    await asyncio.sleep(args.seconds / 3)
    stop.set()
    counted = await asyncio.gather(*tasks)
    stalled = await late
    away = [s for at, s in stalled if not began <= at <= ended]
    return {
        "longest_stall_s": round(max(s for _, s in stalled), 4),
        "longest_stall_away_from_the_compaction_s": round(max(away), 4),
        "stalls_over_20ms": sum(s > 0.02 for _, s in stalled),
        "stall_p99_s": percentiles([s for _, s in stalled])[1],
        "posted": sum(counted[: args.clients]),
        "post_seconds_p50_p99_max": percentiles([s for _, s in post_s]),
        "post_seconds_away_from_the_compaction": percentiles([s for at, s in post_s if not began - 3 <= at <= ended]),
        "lookups": sum(counted[args.clients :]),
        "compaction_meanwhile": compacted,
    }


def loop_stall(model: Path, work: Path, args: argparse.Namespace) -> dict[str, Any]:
    """--loop-stall (see the module docstring): the server's corrections in this process."""
    from transformer_cli import load as load_model
    from transformer_cli.config_corrections import CorrectionsConfig
    from transformer_cli.serving.corrections import ServedCorrections

    translator = load_model(model, device="cpu")
    cfg = CorrectionsConfig(store=str(work / "store"), per_minute=100_000, per_client_per_day=10_000_000)
    began = time.monotonic()
    served = ServedCorrections(cfg, "de")
    read = {"stored": args.stored, "seconds_to_read_the_store": round(time.monotonic() - began, 2)}
    return read | asyncio.run(stalls(served, translator, work, args))


def stand_in(work: Path) -> Path:
    """tiny.yaml trained for one step, its corrections in work/store; the config."""
    config = work / "stand-in.yaml"
    config.write_text(
        f"extends: tiny.yaml\nname: stand-in\ndata: {{dir: {work / 'data'}}}\n"
        f"train: {{out_dir: {work / 'checkpoints'}, max_steps: 1, threads: 1, continued: {{epochs: 1}}}}\n"
        f"corrections: {{store: {work / 'store'}, per_client_per_day: 1000000}}\n"
    )
    subprocess.run([*TFM, "train", "-c", str(config), "--quiet"], check=True)
    return config


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--clients", type=int, default=16, help="posting clients, and as many translating")
    ap.add_argument("--checkpoint", type=Path)
    ap.add_argument("--stored", type=int, default=0, help="corrections in the store before the server starts")
    ap.add_argument("--tsv", type=int, default=0, help="lines of a file `tfm feedback add` adds during the load")
    ap.add_argument("--loop-stall", action="store_true", help="measure the event loop in this process instead")
    args = ap.parse_args()
    if "TFM_DATA_SOURCE" not in os.environ and args.checkpoint is None:
        sys.exit("set TFM_DATA_SOURCE (for the stand-in model) or give --checkpoint")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        config = None if args.checkpoint else stand_in(work)
        prefill(work / "store", args.stored)
        if args.checkpoint:
            model = work / "published.pt"
            shutil.copyfile(args.checkpoint, model)
        else:  # the stand-in run's own published model: its nightly line promotes into it
            model = work / "checkpoints" / "stand-in" / "published.pt"
        if args.loop_stall:
            print(json.dumps(loop_stall(model, work, args), indent=1))
            return
        server = Server(model, work / "store", work)
        server.start()
        try:
            print(json.dumps(asyncio.run(load(server, model, config, args)), indent=1))
        finally:
            server.stop()


if __name__ == "__main__":
    main()
