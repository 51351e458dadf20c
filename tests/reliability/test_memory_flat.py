"""`tfm train` as a user starts it keeps its resident memory flat in bf16 (docs/results.md, "Flat training memory").

A small model on the real Multi30k with base.yaml's batches: under glibc's malloc its RSS
grows by ~70% between step 25 and step 200 (1.36 -> 2.3 GB on the 2-core Xeon), under the
allocator tfm preloads it stays within a few percent (docs/results.md). Skipped where the CPU
has no native bf16 (fp32 does not grow) or where tfm finds no allocator to preload (a plain
`tfm train` runs on glibc there, and grows: the README says so).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time

import pytest

from transformer_cli import allocator

STEPS = 160  # past the allocators' ramp (~50 steps), within glibc's growth (docs/results.md)
BOUND = 1.25  # RSS late in the run over RSS early on


def _rss_mb(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            return next(int(x.split()[1]) / 1024 for x in f if x.startswith("VmRSS:"))
    except (OSError, StopIteration):
        return None


def test_bf16_training_rss_stays_flat(tmp_path, multi30k_dir):
    from transformer_cli.device import cpu_has_fast_bf16

    if not cpu_has_fast_bf16():
        pytest.skip("no native bf16 on this CPU: training runs in fp32, whose memory is flat anyway")
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", allocator.PRELOADED_ENV)}
    env.pop(allocator.ENV, None)
    if allocator.found() is None:
        pytest.skip("no allocator library for tfm to preload here (cmeel-mimalloc): glibc's grows")
    small = {
        "model.d_model": 64,
        "model.d_ff": 128,
        "model.n_heads": 4,
        "model.n_encoder_layers": 1,
        "model.n_decoder_layers": 1,
        "train.precision": "bf16",
        "train.max_steps": STEPS,
        "train.valid_bleu": False,
        "train.snapshot_every_steps": None,
        "train.average_last": 1,
        "train.threads": 2,
        "data.source": multi30k_dir,
        "data.dir": tmp_path / "data",
        "train.out_dir": tmp_path / "runs",
    }
    sets = [a for k, v in small.items() for a in ("--set", f"{k}={'null' if v is None else v}")]
    log = tmp_path / "train.log"
    with open(log, "w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "transformer_cli", "train", "-c", "base.yaml", "--promote", "never", *sets],
            stderr=err,
            stdout=subprocess.DEVNULL,
            env=env,
        )
        samples: list[tuple[float, float]] = []  # (seconds since the first step, RSS MB)
        first_step = None
        while proc.poll() is None:
            time.sleep(0.25)
            if first_step is None and "first optimizer step done" in log.read_text():
                first_step = time.monotonic()
            rss = _rss_mb(proc.pid)
            if first_step is not None and rss is not None:
                samples.append((time.monotonic() - first_step, rss))
    text = log.read_text()
    assert proc.returncode == 0, text[-2000:]
    start = next(line for line in text.splitlines() if ": starting on " in line)
    assert "malloc" in start and "glibc" not in start, start  # the start line names the allocator
    # Medians of two stretches of training steps: past the first steps' ramp, and before the
    # last validation and saving (their own transient peaks are not growth).
    span = samples[-1][0]
    early = statistics.median(r for t, r in samples if 0.05 * span <= t <= 0.15 * span)
    late = statistics.median(r for t, r in samples if 0.6 * span <= t <= 0.9 * span)
    assert late <= BOUND * early, f"RSS grew from {early:.0f} MB to {late:.0f} MB over {STEPS} steps"
