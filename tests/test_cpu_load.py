"""cpu_load.py: this process's CPU load from /proc: how long its threads waited for a CPU and
how many of its CPUs were idle between two samples (what ThreadTuner decides by; tuning
itself: test_threads.py)."""

from __future__ import annotations

import os
import sys

import pytest

from transformer_cli import cpu_load
from transformer_cli.cpu_load import Load, Sample, between, sample

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


def test_no_proc_no_sample(monkeypatch, tmp_path):
    monkeypatch.setattr(cpu_load, "STAT", tmp_path / "missing")
    assert sample() is None


@linux
def test_free_cpus_watches_the_machine_for_a_moment():
    free = cpu_load.free_cpus(0.05)
    assert free is not None and 0.0 <= free <= len(os.sched_getaffinity(0))


def test_free_cpus_without_proc_is_unknown(monkeypatch, tmp_path):
    monkeypatch.setattr(cpu_load, "STAT", tmp_path / "missing")
    assert cpu_load.free_cpus(0.01) is None
