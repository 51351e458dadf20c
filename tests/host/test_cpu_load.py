"""cpu_load.py: this process's CPU load from /proc: how long its threads waited for a CPU and
how many of its CPUs were idle between two samples (what ThreadTuner decides by; tuning
itself: test_threads.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from transformer_cli.host import cpu_load
from transformer_cli.host.cpu_load import Load, Sample, between, sample

linux = pytest.mark.skipif(sys.platform != "linux", reason="/proc")


@linux
def test_a_sample_reads_this_processs_counters():
    s = sample()
    assert s is not None and s.cpus == len(os.sched_getaffinity(0))
    assert s.waited_ns >= 0 and 0 <= s.idle_ticks <= s.total_ticks
    later = sample()
    assert later is not None and later.at >= s.at and later.total_ticks >= s.total_ticks


def test_the_load_between_two_samples():
    first = Sample(at=10.0, waited_ns=0, idle_ticks=100, total_ticks=1000, cpus=2)
    last = Sample(at=11.0, waited_ns=500_000_000, idle_ticks=150, total_ticks=1200, cpus=2)
    assert between(first, last, threads=2) == Load(waiting=0.25, idle_cpus=0.5)  # 0.5 s of 2 s; 50/200 of 2
    assert between(first, last, threads=0).waiting == 0.5  # at least one thread
    assert between(last, last, threads=1) == Load(0.0, 0.0)  # no time, no ticks
    assert between(first, Sample(11.0, 10**12, 100, 1000, 2), 1).waiting == 1.0  # capped
    assert Load(0.25, 0.5).describe() == "threads waited for a CPU 25% of the time, 0.5 CPUs idle"


@linux
def test_presence_is_the_sampling_threads_own():
    """Steps run in a thread other than the main one (the Python API decoding in a web app's
    worker) are present while the main thread waits."""
    result = {}

    def steps():
        first, end = sample(), time.monotonic() + 0.3
        while time.monotonic() < end:
            pass
        last = sample()
        assert first is not None and last is not None
        result["present"] = between(first, last, 1).present

    worker = threading.Thread(target=steps)
    worker.start()
    worker.join()
    assert result["present"] > 0.9, result


def test_the_sampling_threads_presence_between_two_samples():
    first = Sample(10.0, 0, 100, 1000, 2, own_ns=0)
    assert between(first, Sample(12.0, 0, 100, 1000, 2, own_ns=1_500_000_000), 1).present == 0.75
    assert between(first, Sample(12.0, 0, 100, 1000, 2, own_ns=None), 1).present == 1.0  # unknown
    assert between(first, Sample(11.0, 0, 100, 1000, 2, own_ns=5 * 10**9), 1).present == 1.0  # capped


STOPPED = textwrap.dedent("""
    import json, os, signal, time
    from transformer_cli.host.cpu_load import between, sample
    first = sample()
    end = time.monotonic() + 0.5
    while time.monotonic() < end:  # busy
        pass
    busy = sample()
    os.kill(os.getpid(), signal.SIGSTOP)  # continued by the test a second later
    stopped = sample()
    print(json.dumps({"busy": between(first, busy, 1).present, "stopped": between(busy, stopped, 1).present}))
""")


@linux
def test_a_stopped_process_reads_as_absent():
    """A real process: busy, the thread that samples is present (running or waiting for a CPU: a busy
    machine changes nothing); stopped by SIGSTOP for a second, it is not."""
    child = subprocess.Popen([sys.executable, "-c", STOPPED], stdout=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with open(f"/proc/{child.pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "T":  # stopped
                    break
            time.sleep(0.01)
        time.sleep(1.0)
        os.kill(child.pid, signal.SIGCONT)
        out, _ = child.communicate(timeout=30)
    finally:
        child.kill()
    present = json.loads(out)
    assert present["busy"] > 0.9 and present["stopped"] < 0.2, present


def test_no_proc_no_sample(monkeypatch, tmp_path):
    monkeypatch.setattr(cpu_load, "STAT", tmp_path / "missing")
    assert sample() is None


@linux
def test_free_cpus_watches_the_machine_for_a_moment():
    free = cpu_load.free_cpus(0.05)
    assert free is not None and 0.0 <= free <= len(os.sched_getaffinity(0))


def test_free_cpus_on_a_busy_machine_is_zero_not_minus_zero(monkeypatch):
    """No idle tick, and this process's own CPU time unchanged: 0.0, which the start line
    prints as "0.0 free" (the sum of user and system times, subtracted whole, came out at
    -1e-16 and printed "-0.0 free")."""
    samples = iter([Sample(1.0, 0, 50, 100, 2), Sample(1.3, 0, 50, 300, 2)])
    times = iter([os.times_result((0.3, 0.6, 0, 0, 0)), os.times_result((0.3, 0.6, 0, 0, 0))])
    monkeypatch.setattr(cpu_load, "sample", lambda: next(samples))
    monkeypatch.setattr(cpu_load.os, "times", lambda: next(times))
    free = cpu_load.free_cpus(0.0)
    assert free == 0.0 and f"{free:.1f}" == "0.0"


def test_free_cpus_without_proc_is_unknown(monkeypatch, tmp_path):
    monkeypatch.setattr(cpu_load, "STAT", tmp_path / "missing")
    assert cpu_load.free_cpus(0.01) is None
