"""`tfm train` on a machine it shares: `train.priority` applied to the real training process
(every thread, and the DataLoader worker it starts), read back from /proc and the ioprio_get
system call; `train.threads: auto` says what it starts with, a fixed number says it is fixed.
The tuner's decisions: tests/test_threads.py."""

from __future__ import annotations

import os
import re
import signal
import sys
from pathlib import Path

import pytest
from reliability.cron_helpers import run_dir, wait_until

from transformer_cli.host.priority import IOPRIO_BEST_EFFORT_LOWEST, io_priority

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux scheduling")]


def scheduling(pid: int) -> dict[int, tuple[int, int, int | None]]:
    """(niceness, policy, I/O priority) of every thread of process `pid`."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            fields = Path(f"/proc/{pid}/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
        except FileNotFoundError:  # a thread that ended meanwhile
            continue
        out[int(tid)] = (int(fields[16]), int(fields[38]), io_priority(int(tid)))  # stat fields 19, 41
    return out


def children(pid: int) -> list[int]:
    found = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        text = Path(f"/proc/{pid}/task/{tid}/children").read_text()
        found += [int(c) for c in text.split()]
    return found


def test_priority_low_reaches_every_thread_and_the_data_worker(make_config, tfm_fork, tmp_path):
    cfg = make_config("low", epochs=500, threads="auto", priority="low", data_workers=1)
    log = run_dir(cfg) / "train.log"
    pid = tfm_fork.start("train", "-c", str(cfg), "--quiet", log_to=tmp_path / "low.err")
    try:
        wait_until(lambda: log.is_file() and "first optimizer step done" in log.read_text(), 120, "the first step")
        threads = scheduling(pid)
        workers = children(pid)
        worker_threads = {tid: s for w in workers for tid, s in scheduling(w).items()}
    finally:
        os.kill(pid, signal.SIGTERM)
        assert tfm_fork.wait(pid) == 143
    low = (10, os.SCHED_BATCH, IOPRIO_BEST_EFFORT_LOWEST)
    assert len(threads) > 1 and set(threads.values()) == {low}, threads
    assert workers and set(worker_threads.values()) == {low}, worker_threads
    text = log.read_text()
    cpus = len(os.sched_getaffinity(0))
    started = (  # at the count the CPUs left free held when it started
        rf"train\.threads auto: (1 thread|\d+ threads) to start \(of {cpus} CPUs, [\d.]+ free\), "
        "re-chosen from the measured speed"
        if cpus > 1
        else re.escape("train.threads auto: 1 thread, fixed (one CPU)")
    )
    assert re.search(f"{started}; priority: nice 10, SCHED_BATCH, I/O best-effort 7", text), text


def test_normal_priority_and_a_fixed_thread_count_change_nothing(make_config, tfm_fork, tmp_path):
    cfg = make_config("fixed", epochs=1, threads=1)
    [r] = tfm_fork.run_all(tmp_path / "logs", ("train", "-c", str(cfg), "--quiet"))
    assert r.returncode == 0, r.stderr
    text = (run_dir(cfg) / "train.log").read_text()
    assert "train.threads: 1 thread, fixed; priority: nice 0, SCHED_OTHER" in text
    assert "auto" not in text
