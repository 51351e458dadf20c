"""`tfm serve` under load, printed as JSON.

Starts the server on a copy of a config's published model, sends the test sentences as
single-sentence POST /translate requests from 1, 4, 16 and 64 concurrent HTTP clients (httpx),
and reports sentences/s, p50/p95/p99 latency and the mean batch size the server formed, next
to the same sentences through `model.translate` in this process, one at a time and in one big
batch (same thread count). Then, with 16 clients sending, it promotes a different checkpoint
(atomically, as `tfm train` does) and reports failed requests and the reload time. The
server's resident memory is read after each stage and after it has idled for 3 s, with the
allocator it runs on (compare `TFM_ALLOCATOR=system python benchmarks/serve_load.py ...`).

    python benchmarks/serve_load.py --config base.yaml
    python benchmarks/serve_load.py -c base.yaml --sentences 300 --threads 2 --set train.out_dir=/srv/ckpt
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import torch

import transformer_cli as tfm
from transformer_cli.checkpoint import Checkpoint
from transformer_cli.config_loading import load_config
from transformer_cli.config_train import DEVICES, PRECISIONS
from transformer_cli.data.prepared import load_prepared
from transformer_cli.model_source import published_model
from transformer_cli.serving.server import serve_threads


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        return round(int(next(x for x in f if x.startswith("VmRSS:")).split()[1]) / 1024, 1)


def allocator_of(pid: int) -> str:
    maps = Path(f"/proc/{pid}/maps").read_text()
    return next((name for name in ("mimalloc", "tcmalloc", "jemalloc") if f"lib{name}" in maps), "glibc")


def metric(url: str, name: str) -> float:
    found = re.search(rf"^{re.escape(name)} (\S+)$", httpx.get(url + "/metrics").text, re.M)
    return float(found.group(1)) if found else 0.0


def percentiles(latencies: list[float]) -> dict[str, float]:
    q = statistics.quantiles(latencies, n=100, method="inclusive")
    return {f"p{p}_ms": round(q[p - 1] * 1000, 1) for p in (50, 95, 99)}


async def send(url: str, sentences: list[str], clients: int, beam_size: int, on_progress=None) -> dict:
    """Each sentence as its own request from `clients` clients, each with its own connection
    (opened before the clock starts); latencies, failures and the models that answered."""
    todo = iter(sentences)
    latencies: list[float] = []
    failures: list[str] = []
    shas: dict[str, int] = {}
    connected = asyncio.Barrier(clients + 1)  # type: ignore[attr-defined]  # Python 3.11+ (mypy checks for 3.10)

    async def client_loop() -> None:
        async with httpx.AsyncClient(base_url=url, timeout=120) as client:
            await client.get("/health")
            await connected.wait()
            for sentence in todo:
                started = time.perf_counter()
                try:
                    r = await client.post(
                        "/translate", json={"inputs": sentence, "parameters": {"beam_size": beam_size}}
                    )
                    if r.status_code != 200:
                        failures.append(f"{r.status_code}: {r.text[:200]}")
                    sha = r.headers.get("x-model-sha256", "")
                    shas[sha] = shas.get(sha, 0) + 1
                except httpx.HTTPError as e:
                    failures.append(f"{type(e).__name__}: {e}")
                latencies.append(time.perf_counter() - started)
                if on_progress is not None:
                    on_progress(len(latencies))

    tasks = [asyncio.create_task(client_loop()) for _ in range(clients)]
    await connected.wait()
    started = time.perf_counter()
    await asyncio.gather(*tasks)
    return {"seconds": time.perf_counter() - started, "latencies": latencies, "failures": failures, "shas": shas}


def level(url: str, sentences: list[str], clients: int, beam_size: int) -> dict:
    batches, batched = metric(url, "tfm_batch_sentences_count"), metric(url, "tfm_batch_sentences_sum")
    run = asyncio.run(send(url, sentences, clients, beam_size))
    batches = metric(url, "tfm_batch_sentences_count") - batches
    batched = metric(url, "tfm_batch_sentences_sum") - batched
    return {
        "clients": clients,
        "sentences_per_s": round(len(sentences) / run["seconds"], 1),
        **percentiles(run["latencies"]),
        "mean_batch_size": round(batched / max(batches, 1), 2),
        "failed_requests": len(run["failures"]),
        "failures": run["failures"][:3],  # the first few, status and text (503: admission refused)
    }


def in_process(path: Path, sentences: list[str], threads: int, beam_size: int, device: str, precision: str) -> dict:
    torch.set_num_threads(threads)
    model = tfm.load(path, device=device, precision=precision)
    model.translate(sentences[:8], beam_size=beam_size)  # warm-up
    started = time.perf_counter()
    for sentence in sentences:
        model.translate([sentence], beam_size=beam_size)
    one_s = time.perf_counter() - started
    started = time.perf_counter()
    model.translate(sentences, beam_size=beam_size)
    batch_s = time.perf_counter() - started
    return {
        "one_at_a_time_sentences_per_s": round(len(sentences) / one_s, 1),
        "one_batch_sentences_per_s": round(len(sentences) / batch_s, 1),
    }


def hot_reload(url: str, sentences: list[str], published: Path, other: Path, beam_size: int) -> dict:
    """16 clients send; a third of the way through, `other` is renamed over the served file
    (the last step of a promotion)."""
    new_sha = Checkpoint.read(other).sha256
    swapped: dict[str, float] = {}

    def progress(done: int) -> None:
        if "written" not in swapped and done >= len(sentences) // 3:
            swapped["written"] = time.perf_counter()
            os.replace(other, published)

    async def watch() -> None:
        while "written" not in swapped:
            await asyncio.sleep(0.01)
        async with httpx.AsyncClient(base_url=url, timeout=30) as client:
            while (await client.get("/health")).json()["model"]["sha256"] != new_sha:
                await asyncio.sleep(0.01)
        swapped["serving"] = time.perf_counter()

    async def both() -> dict:
        watcher = asyncio.create_task(watch())
        run = await send(url, sentences, 16, beam_size, progress)
        await asyncio.wait_for(watcher, 60)
        return run

    run = asyncio.run(both())
    return {
        "clients": 16,
        "requests": len(sentences),
        "failed_requests": len(run["failures"]),
        "failures": run["failures"][:5],
        "answered_by_model": run["shas"],
        "reload_s": round(metric(url, "tfm_model_reload_seconds"), 3),
        "file_to_serving_s": round(swapped["serving"] - swapped["written"], 3),
        **percentiles(run["latencies"]),
    }


def start_server(
    config: str, overrides: list[str], published: Path, port: int, threads: int, device: str, precision: str, log: Path
) -> tuple[subprocess.Popen, float]:
    sets = [x for o in overrides for x in ("--set", o)]
    started = time.perf_counter()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "transformer_cli",
            "serve",
            "-c",
            config,
            *sets,
            "--checkpoint",
            str(published),
            "--port",
            str(port),
            "--device",
            device,
            "--precision",
            precision,
            "--set",
            f"serve.threads={threads}",
            "--set",
            "serve.reload_poll_s=0.1",
        ],
        stdout=subprocess.DEVNULL,
        stderr=open(log, "wb"),
    )
    while True:
        if proc.poll() is not None:
            raise SystemExit(f"the server exited ({proc.returncode}):\n{log.read_text()}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                return proc, time.perf_counter() - started
        except httpx.TransportError:
            time.sleep(0.02)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", "-c", default="base.yaml")
    ap.add_argument("--set", dest="overrides", action="append", default=[], help="config override")
    ap.add_argument("--checkpoint", type=Path, help="default: the config's published model")
    ap.add_argument(
        "--other",
        type=Path,
        help="the checkpoint promoted mid-load (default: the same weights saved again, a different sha256)",
    )
    ap.add_argument("--sentences", type=int, default=1000, help="first N test sentences")
    ap.add_argument("--clients", default="1,4,16,64")
    ap.add_argument("--beam-size", type=int, default=1)
    ap.add_argument("--threads", type=int, default=serve_threads())
    ap.add_argument("--device", default="auto", choices=DEVICES, help="as `tfm serve --device`")
    ap.add_argument("--precision", default="fp32", choices=PRECISIONS)
    args = ap.parse_args()

    cfg = load_config(args.config, args.overrides)
    source = args.checkpoint or published_model(cfg.run_dir, args.config)
    sentences = load_prepared(cfg).text("test", cfg.data.src_lang)[: args.sentences]
    baseline = in_process(source, sentences, args.threads, args.beam_size, args.device, args.precision)
    with tempfile.TemporaryDirectory() as tmp:
        published, other = Path(tmp) / "published.pt", Path(tmp) / "other.pt"
        published.write_bytes(source.read_bytes())
        if args.other:
            other.write_bytes(args.other.read_bytes())
        else:
            checkpoint = Checkpoint.read(source)
            checkpoint.metrics = {**checkpoint.metrics, "benchmark": "promoted mid-load"}
            checkpoint.write(other)
        port = free_port()
        proc, ready_s = start_server(
            args.config,
            args.overrides,
            published,
            port,
            args.threads,
            args.device,
            args.precision,
            Path(tmp) / "serve.log",
        )
        url = f"http://127.0.0.1:{port}"
        memory = {"ready": rss_mb(proc.pid)}
        try:
            level(url, sentences[:16], 4, args.beam_size)  # warm-up
            levels = []
            for clients in args.clients.split(","):
                levels.append(level(url, sentences, int(clients), args.beam_size))
                memory[f"after_{clients}_clients"] = rss_mb(proc.pid)
            reload = hot_reload(url, sentences, published, other, args.beam_size)
            memory["after_reload"] = rss_mb(proc.pid)
            time.sleep(3)  # past the batcher's idle trim (serving/batcher.py IDLE_S)
            memory["idle_3s"] = rss_mb(proc.pid)
            allocator = allocator_of(proc.pid)
        finally:
            proc.terminate()
            exit_code = proc.wait(60)
    one = next((x for x in levels if x["clients"] == 1), None)
    result = {
        "checkpoint": str(source),
        "sentences": len(sentences),
        "beam_size": args.beam_size,
        "threads": args.threads,
        "cpu_count": os.cpu_count(),
        "device": args.device,
        "precision": args.precision,
        "torch": torch.__version__,
        "server_ready_s": round(ready_s, 2),
        "server": levels,
        "server_allocator": allocator,
        "server_rss_mb": memory,
        "speedup_vs_one_client": {x["clients"]: round(x["sentences_per_s"] / one["sentences_per_s"], 2) for x in levels}
        if one
        else None,
        "in_process": baseline,
        "hot_reload": reload,
        "server_exit_code_on_sigterm": exit_code,
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
