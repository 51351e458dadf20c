"""Corrections under load: 16 clients post corrections to `tfm serve` while 16 translate, across
a nightly promotion and a SIGKILL of the server (then started again on the same store).
Counted: corrections acknowledged (200), those missing from the store afterwards (lost), and
whether each acknowledged correction is answered from memory, with the time from its 200 to
the first /translate that answers it so. Printed as JSON.

The model is a stand-in unless --checkpoint names one: tiny.yaml trained for one step (what is
measured is the corrections' path, not translation quality). With the stand-in, the promotion
is the nightly line itself, run while the clients post: `tfm train --init-from published` on
the store the server writes, promoting into the file the server serves, which reloads it.
With --checkpoint, the promotion is that file rewritten. Run it alone on the machine.

    python benchmarks/corrections_load.py [--seconds 30] [--checkpoint published.pt]
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
from transformer_cli.corrections.store import CorrectionStore

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

    def start(self) -> None:
        self.proc = subprocess.Popen(self.args, stderr=open(self.work / "serve.log", "ab"))
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if httpx.get(self.url + "/health", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                time.sleep(0.1)
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

    def refuse(self, what: str) -> None:
        self.refused[what] = self.refused.get(what, 0) + 1


async def poster(server: Server, counts: Counts, i: int, stop: asyncio.Event) -> None:
    n = 0
    async with httpx.AsyncClient(timeout=10) as client:
        while not stop.is_set():
            source = f"Ein Satz {i}-{n} für den Speicher."
            body = {"source": source, "corrected": f"A sentence {i}-{n} for the memory.", "client": f"c{i}"}
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


async def load(server: Server, model: Path, config: Path | None, seconds: float, clients: int) -> dict[str, Any]:
    counts, stop = Counts(), asyncio.Event()
    tasks = [asyncio.create_task(poster(server, counts, i, stop)) for i in range(clients)]
    tasks += [asyncio.create_task(translator(server, counts, i, stop)) for i in range(clients)]
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
    stored = {c.id for c in CorrectionStore(server.work / "store").corrections()}
    served = sorted(counts.served_after)
    return {
        "acknowledged": len(counts.acked),
        "acknowledged_before_the_kill": killed_with,
        "lost": sum(i not in stored for i in counts.acked),
        "stored": len(stored),
        "acknowledged_before_the_night": acked_before_the_night,
        "night": night,
        "reloaded_during_load": reloaded,
        "translations_answered": counts.translations,
        "refused_or_failed": counts.refused,
        "checked_at_once_and_answered_from_memory": len(served),
        "checked_at_once_and_answered_by_the_model": counts.not_from_memory,
        "not_checked_the_server_was_down": counts.unchecked,
        "seconds_from_200_to_memory_p50_p99_max": [
            round(served[len(served) // 2], 3) if served else None,
            round(served[int(len(served) * 0.99)], 3) if served else None,
            round(served[-1], 3) if served else None,
        ],
    }


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
    args = ap.parse_args()
    if "TFM_DATA_SOURCE" not in os.environ and args.checkpoint is None:
        sys.exit("set TFM_DATA_SOURCE (for the stand-in model) or give --checkpoint")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        config = None if args.checkpoint else stand_in(work)
        if args.checkpoint:
            model = work / "published.pt"
            shutil.copyfile(args.checkpoint, model)
        else:  # the stand-in run's own published model: its nightly line promotes into it
            model = work / "checkpoints" / "stand-in" / "published.pt"
        server = Server(model, work / "store", work)
        server.start()
        try:
            print(json.dumps(asyncio.run(load(server, model, config, args.seconds, args.clients)), indent=1))
        finally:
            server.stop()


if __name__ == "__main__":
    main()
