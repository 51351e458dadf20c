"""`tfm serve` under load from wrk (a load generator in C, Debian's `wrk` package), printed as
JSON: sentences/s, p50/p99 latency, the share answered 503 (load shedding), socket errors and
the server's memory at 1, 4, 16 and 64 connections, one test2016 sentence per request
(a Lua script rotates them); beside them, the same backend decoding the sentences offline in
batches with the same threads, and the BLEU of what the server answered.

    python benchmarks/serve_wrk.py -c base.yaml                         # the published model, torch
    python benchmarks/serve_wrk.py -c base.yaml --model exports/base-int8 --threads 2
    python benchmarks/serve_wrk.py -c base.yaml --set serve.max_pending_s=null   # no shedding
    python benchmarks/serve_wrk.py -c base.yaml --server-code /tmp/old   # an older tfm's server
        (git worktree add /tmp/old <commit>: that checkout serves; this one measures)

Latency per outcome (admitted: 200, shed: 503) comes from the server's own histogram
(tfm_request_latency_seconds by path and code), read before and after each level, and with it
the admitted requests answered after 1 s (`admitted_over_1s`, serve.max_pending_s's default);
wrk's percentiles cover every answer. Runs the server and wrk on this machine: run it alone.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import sacrebleu
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT))

from serve_load import free_port, rss_mb  # noqa: E402

from transformer_cli.api import open_backend  # noqa: E402
from transformer_cli.config_loading import load_config, resolve_config_path  # noqa: E402
from transformer_cli.model_source import published_model  # noqa: E402
from transformer_cli.training.run_data import prepare_run_data  # noqa: E402

LUA = """
local bodies = {%s}
local i = 0
request = function()
  i = i %% #bodies + 1
  return wrk.format("POST", "/translate", {["Content-Type"] = "application/json"}, bodies[i])
end
"""


def histogram(url: str, code: str) -> dict[float, float]:
    """Cumulative counts of /translate answers with `code` per latency bucket (le -> count)."""
    text = httpx.get(url + "/metrics").text
    pattern = r'^tfm_request_latency_seconds_bucket\{code="' + code + r'",le="([^"]+)",path="/translate"\} (\S+)$'
    return {float(le): float(value) for le, value in re.findall(pattern, text, re.M)}


def answers(url: str) -> dict[str, float]:
    """/translate answers so far, by HTTP status code."""
    text = httpx.get(url + "/metrics").text
    pattern = r'^tfm_requests_total\{code="(\d+)",path="/translate"\} (\S+)$'
    return {code: float(n) for code, n in re.findall(pattern, text, re.M)}


def metric(url: str, name: str) -> float:
    found = re.search(rf"^{re.escape(name)} (\S+)$", httpx.get(url + "/metrics").text, re.M)
    return float(found.group(1)) if found else 0.0


def quantile(before: dict[float, float], after: dict[float, float], q: float) -> float | None:
    """The bucket bound within which a share q of the answers of the interval fell (seconds)."""
    counts = {le: after.get(le, 0.0) - before.get(le, 0.0) for le in after}
    total = counts.get(float("inf"), 0.0)
    if not total:
        return None
    return next(le for le in sorted(counts) if counts[le] >= q * total)


def later_than(before: dict[float, float], after: dict[float, float], bound: float) -> int | None:
    """Answers of the interval that took longer than `bound` seconds (None where the histogram
    has no bucket at `bound`)."""
    if bound not in after:
        return None
    inf = float("inf")
    return int(after[inf] - before.get(inf, 0.0) - (after[bound] - before.get(bound, 0.0)))


def wrk(url: str, script: Path, connections: int, seconds: int) -> dict:
    out = subprocess.run(
        [
            "wrk",
            "-t",
            str(min(2, connections)),
            "-c",
            str(connections),
            "-d",
            f"{seconds}s",
            "--latency",
            "--timeout",
            "30s",
            "-s",
            str(script),
            url,
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout

    def found(pattern: str) -> re.Match[str]:
        match = re.search(pattern, out, re.M)
        assert match, f"wrk printed no {pattern!r}: {out}"
        return match

    def ms(label: str) -> float:
        value, unit = found(rf"^\s+{label}\s+([\d.]+)(us|ms|s)\s*$").groups()
        return float(value) * {"us": 1e-3, "ms": 1.0, "s": 1000.0}[unit]

    requests = int(found(r"(\d+) requests in").group(1))
    non_2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    errors = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    return {
        "requests": requests,
        "non_2xx": int(non_2xx.group(1)) if non_2xx else 0,
        "socket_errors": sum(map(int, errors.groups())) if errors else 0,
        "p50_ms": ms("50%"),
        "p99_ms": ms("99%"),
    }


async def served_translations(url: str, sentences: list[str], concurrency: int) -> list[str]:
    """Every sentence through the server, `concurrency` at a time, answers in order."""
    gate, out = asyncio.Semaphore(concurrency), [""] * len(sentences)
    async with httpx.AsyncClient(base_url=url, timeout=120) as client:

        async def one(i: int) -> None:
            async with gate:
                while True:
                    r = await client.post("/translate", json={"inputs": sentences[i]})
                    if r.status_code != 503:
                        break
                    await asyncio.sleep(float(r.headers.get("Retry-After", "1")))
                out[i] = r.json()[0]["translation_text"]

        await asyncio.gather(*(one(i) for i in range(len(sentences))))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-c", "--config", default="base.yaml")
    ap.add_argument("--model", type=Path, help="checkpoint or export folder (default: the published model)")
    ap.add_argument("--set", dest="overrides", action="append", default=[])
    ap.add_argument("--connections", default="1,4,16,64")
    ap.add_argument("--seconds", type=int, default=20)
    ap.add_argument("--threads", type=int, default=1, help="the server's decoding threads")
    ap.add_argument("--server-code", type=Path, help="a checkout of another tfm revision to serve with")
    args = ap.parse_args()
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is not on PATH (Debian: apt-get install wrk; or build github.com/wg/wrk)")
    cfg = load_config(args.config, args.overrides)
    model = args.model or published_model(cfg.run_dir, args.config)
    prepared, _ = prepare_run_data(cfg)
    sources, refs = prepared.text("test", cfg.data.src_lang), prepared.text("test", cfg.data.tgt_lang)

    torch.set_num_threads(args.threads)
    backend = open_backend(model, "cpu", threads=args.threads)
    backend.translate(sources[:16])
    started = time.perf_counter()
    offline = [h[0].text for h in backend.translate(sources).translations]
    offline_s = time.perf_counter() - started
    result: dict = {
        "model": str(model),
        "threads": args.threads,
        "decoding": backend.decode.beam_size,
        "offline": {
            "sentences_per_s": round(len(sources) / offline_s, 1),
            "bleu": round(sacrebleu.corpus_bleu(offline, [refs]).score, 2),
        },
        "levels": [],
    }
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "rotate.lua"
        bodies = ", ".join(json.dumps(json.dumps({"inputs": s})) for s in sources)
        script.write_text(LUA % bodies, encoding="utf-8")
        port = free_port()
        sets = [x for o in [*args.overrides, f"serve.threads={args.threads}"] for x in ("--set", o)]
        log = open(Path(tmp) / "serve.log", "wb")
        env = dict(os.environ)
        if args.server_code:
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(args.server_code.resolve()), env.get("PYTHONPATH")]))
            result["server_code"] = str(args.server_code)
        # From the other checkout's folder: `python -m` looks in the working directory first.
        config = str(Path(resolve_config_path(args.config)).resolve())
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "transformer_cli",
                "serve",
                "-c",
                config,
                "--checkpoint",
                str(Path(model).resolve()),
                "--port",
                str(port),
                *sets,
            ],
            stdout=subprocess.DEVNULL,
            stderr=log,
            env=env,
            cwd=args.server_code.resolve() if args.server_code else None,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            for _ in range(600):
                try:
                    if httpx.get(url + "/health", timeout=1).status_code == 200:
                        break
                except httpx.TransportError:
                    if proc.poll() is not None:
                        log.flush()
                        tail = Path(log.name).read_text(errors="replace")[-2000:]
                        raise SystemExit("the server did not start:\n" + tail) from None
                    time.sleep(0.1)
            wrk(url, script, 4, 3)  # warm-up
            for connections in map(int, args.connections.split(",")):
                ok0, shed0 = histogram(url, "200"), histogram(url, "503")
                codes0 = answers(url)
                sentences0 = metric(url, "tfm_sentences_total")
                load = wrk(url, script, connections, args.seconds)
                ok1, shed1 = histogram(url, "200"), histogram(url, "503")
                codes = {c: int(n - codes0.get(c, 0.0)) for c, n in answers(url).items() if n > codes0.get(c, 0.0)}
                translated = metric(url, "tfm_sentences_total") - sentences0
                result["levels"].append(
                    {
                        "connections": connections,
                        "sentences_per_s": round(translated / args.seconds, 1),
                        "p50_ms": load["p50_ms"],
                        "p99_ms": load["p99_ms"],
                        "share_503": round(codes.get("503", 0) / max(sum(codes.values()), 1), 3),
                        "answers_by_code": codes,
                        "wrk_non_2xx": load["non_2xx"],
                        "admitted_p99_s_at_most": quantile(ok0, ok1, 0.99),
                        "admitted_over_1s": later_than(ok0, ok1, 1.0),
                        "admission_margin": metric(url, "tfm_admission_margin"),
                        "shed_p99_s_at_most": quantile(shed0, shed1, 0.99),
                        "socket_errors": load["socket_errors"],
                        "server_rss_mb": rss_mb(proc.pid),
                    }
                )
            served = asyncio.run(served_translations(url, sources, 16))
            result["served_bleu_16_connections"] = round(sacrebleu.corpus_bleu(served, [refs]).score, 2)
            result["served_equal_offline"] = round(sum(a == b for a, b in zip(served, offline)) / len(served), 4)
        finally:
            proc.terminate()
            proc.wait(60)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
