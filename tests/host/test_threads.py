"""`threads: auto` (transformer_cli/threads.py): the tuner's decisions, driven through its public
API by step times of a simulated machine (the speed of each thread count and the CPU load are
given, the clock is the simulation's), and once by real torch steps beside a real busy process.
The tuner inside `tfm train`: tests/reliability/test_shared_machine.py."""

from __future__ import annotations

import importlib.util
import json
import logging
import math
import os
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from transformer_cli.errors import UsageError
from transformer_cli.host import cpu_load
from transformer_cli.host import threads as threads_module
from transformer_cli.host.threads import (
    FixedThreads,
    ThreadTuner,
    Timing,
    count_for,
    ladder,
    parse_setting,
    start_count,
)


class Machine:
    """A simulated 2-CPU machine: tokens/s per thread count, and what the load counters read
    (the share of time the threads wait for a CPU, the CPUs left idle) under each count."""

    def __init__(
        self,
        speed: dict[int, float],
        waiting: dict[int, float],
        idle: dict[int, float],
        noise: float = 0.0,
        seed: int = 0,
    ):
        self.speed, self.waiting, self.idle = speed, waiting, idle
        self.noise, self.rng = noise, random.Random(seed)  # each step's time x exp(N(0, noise))
        self.t = 0.0
        self.waited_ns = self.idle_ticks = self.total_ticks = self.own_ns = 0.0
        self.count = 0
        self.steps_at: dict[int, int] = {}

    def clock(self) -> float:
        return self.t

    def sample(self) -> cpu_load.Sample:
        return cpu_load.Sample(
            self.t, int(self.waited_ns), int(self.idle_ticks), int(self.total_ticks), 2, int(self.own_ns)
        )

    def apply(self, count: int) -> None:
        self.count = count

    def step(self, tuner: ThreadTuner, tokens: float = 2000.0, stopped: float = 0.0) -> None:
        """One step; `stopped` seconds of it the process was stopped (SIGSTOP): its threads
        neither ran nor waited, and the CPUs stood idle."""
        seconds = tokens / self.speed[self.count] * (math.exp(self.rng.gauss(0, self.noise)) if self.noise else 1.0)
        self.t += seconds + stopped
        self.own_ns += seconds * 1e9
        self.waited_ns += self.waiting[self.count] * seconds * self.count * 1e9
        self.idle_ticks += (self.idle[self.count] * seconds + 2 * stopped) * 100
        self.total_ticks += 2 * (seconds + stopped) * 100
        self.steps_at[self.count] = self.steps_at.get(self.count, 0) + 1
        tuner.record(tokens, seconds + stopped)

    def run(self, tuner: ThreadTuner, seconds: float) -> None:
        end = self.t + seconds
        while self.t < end:
            self.step(tuner)


ALONE = dict(speed={1: 1529.0, 2: 2722.0}, waiting={1: 0.01, 2: 0.02}, idle={1: 0.9, 2: 0.0})
# Beside one busy process of equal priority (docs/results.md): two threads collapse.
BESIDE = dict(speed={1: 1438.0, 2: 901.0}, waiting={1: 0.02, 2: 0.45}, idle={1: 0.0, 2: 0.0})
NICE_19 = dict(speed={1: 1528.0, 2: 2737.0}, waiting={1: 0.01, 2: 0.03}, idle={1: 0.0, 2: 0.0})


def tuner_on(machine: Machine, **timing) -> ThreadTuner:
    return ThreadTuner(
        "train.threads",
        "tokens",
        cpus=2,
        apply=machine.apply,
        load=machine.sample,
        clock=machine.clock,
        timing=Timing(**timing),
    )


def test_a_busy_neighbour_moves_training_to_one_thread_in_seconds_and_it_is_said_once(caplog):
    machine = Machine(**BESIDE)
    tuner = tuner_on(machine)
    assert machine.count == 2 and "2 threads to start (of 2 CPUs)" in tuner.describe()
    with caplog.at_level(logging.INFO, logger="tfm"):
        machine.run(tuner, 15)
        assert tuner.changes == [(2, 1)] and tuner.count == 1
        [line] = [r.getMessage() for r in caplog.records if r.levelno >= logging.INFO]
        assert line.startswith("train.threads auto: 1 thread now (")
        assert "against 901 with 2 threads; threads waited for a CPU 45% of the time" in line
        machine.run(tuner, 3600)  # an hour more beside it: re-checks of two threads, no change
    assert tuner.changes == [(2, 1)] and machine.count == 1
    assert tuner.summary().startswith("train.threads auto: 1 thread at the end; ")
    shown = f"({tuner.probe_seconds:,.1f} s of {tuner.step_seconds:,.0f} s of steps), 1 kept"
    assert tuner.summary().endswith(f" {tuner.probes} probes of another count {shown}") and tuner.probes > 2
    steps_at_two = machine.steps_at[2] / sum(machine.steps_at.values())
    assert steps_at_two < 0.02, f"{steps_at_two:.1%} of the steps were spent probing two threads"


def test_under_heavy_load_the_warm_up_step_is_the_last_at_all_cpus():
    moderate, heavy = (
        Machine(**BESIDE),
        Machine(speed={1: 1000.0, 2: 100.0}, waiting={1: 0.05, 2: 0.8}, idle={1: 0.0, 2: 0.0}),
    )
    for machine in (moderate, heavy):
        tuner = tuner_on(machine)
        while not tuner.changes:
            machine.step(tuner)
        assert tuner.changes == [(2, 1)]
    assert moderate.steps_at[2] == 2 and heavy.steps_at[2] == 1  # warm-up + a window; warm-up only


def test_alone_or_beside_a_nice_19_neighbour_the_threads_stay_and_probes_cost_under_1_percent():
    for conditions in (ALONE, NICE_19):
        machine = Machine(**conditions)
        tuner = tuner_on(machine)
        machine.run(tuner, 3600)
        assert tuner.changes == [] and machine.count == 2
        lost = machine.steps_at.get(1, 0) * 2000 * (1 / 1529 - 1 / 2722)  # seconds the probes cost
        assert lost / 3600 < 0.01
        # What the run's summary line reports: the time at the probed count, which bounds the cost.
        assert tuner.probe_seconds == pytest.approx(machine.steps_at.get(1, 0) * 2000 / machine.speed[1])
        assert tuner.step_seconds == pytest.approx(machine.t) and lost < tuner.probe_seconds < 0.02 * machine.t


def test_alone_with_steps_as_uneven_as_real_batches_a_recheck_keeps_the_faster_count():
    """Real steps differ in speed (batches of other lengths): alone, a re-check's one-second
    window at one thread once measured 1.29x the two threads' window before it, and the run
    switched to one thread for 21 s (issue 39's student, 2026-11-27). Re-checks compare
    10-second windows: over simulated hours alone whose steps vary by a factor e^N(0, 0.4),
    none keeps a change; with the one-second windows of before, some runs do."""
    runs_that_changed = {}
    for window in (10.0, 1.0):
        runs_that_changed[window] = 0
        for seed in range(12):
            machine = Machine(**ALONE, noise=0.4, seed=seed)
            tuner = tuner_on(machine, recheck_window_s=window)
            machine.run(tuner, 3600)
            runs_that_changed[window] += bool(tuner.changes)
            assert machine.count == 2  # a wrong switch is undone: one thread leaves a CPU idle
            if window == 10.0:
                assert tuner.probe_seconds < 0.02 * machine.t
    assert runs_that_changed[10.0] == 0 and runs_that_changed[1.0] > 0, runs_that_changed


def test_the_neighbour_leaving_brings_the_threads_back():
    machine = Machine(**BESIDE)
    tuner = tuner_on(machine)
    machine.run(tuner, 60)
    assert tuner.count == 1
    machine.speed, machine.waiting, machine.idle = ALONE["speed"], ALONE["waiting"], ALONE["idle"]
    machine.run(tuner, 30)  # one idle CPU: two threads are tried, and kept
    assert tuner.changes == [(2, 1), (1, 2)] and machine.count == 2


def test_a_difference_within_the_margin_changes_nothing_and_probes_space_out():
    machine = Machine(speed={1: 1000.0, 2: 1050.0}, waiting={1: 0.0, 2: 0.3}, idle={1: 0.0, 2: 0.0})
    tuner = tuner_on(machine)
    probes = []
    last = machine.count
    while machine.t < 1800:
        machine.step(tuner)
        if machine.count != last and machine.count == 1:
            probes.append(machine.t)
        last = machine.count
    assert tuner.changes == [] and machine.count == 2
    gaps = [b - a for a, b in zip(probes, probes[1:])]
    assert gaps[-1] > 100 and len(probes) < 25  # the load keeps signalling; probes back off to 2 min
    at_one = f"({tuner.probe_seconds:,.1f} s of {tuner.step_seconds:,.0f} s of steps)"
    assert (
        tuner.summary()
        == f"train.threads auto: 2 threads at the end; {len(probes)} probes of another count {at_one}, 0 kept"
    )


def test_a_pause_between_steps_is_not_measured():
    """A validation or a save inside a window (wall time far beyond the steps' own) restarts
    the window instead of comparing it."""
    machine = Machine(**BESIDE)
    tuner = tuner_on(machine, warmup_steps=1, window_steps=2)
    for _ in range(2):  # the warm-up step and the first of a window
        machine.step(tuner)
    machine.t += 60  # a validation
    machine.step(tuner)
    assert tuner.count == 2  # the window restarted: no probe yet
    machine.run(tuner, 15)
    assert tuner.count == 1


def test_a_stopped_process_is_not_measured():
    """SIGSTOP inside the window before a re-check's probe (the stop is inside one step's time:
    the stepping thread neither ran nor waited for it) is left out; the probe is compared with the
    next window, and two threads stay. Measured, the stopped window read ~1% of the speed and
    the probe's one thread was kept."""
    machine = Machine(**ALONE)
    tuner = tuner_on(machine)
    machine.run(tuner, 301)  # the first re-check is due: its longer window has begun
    machine.step(tuner, stopped=120.0)
    machine.run(tuner, 60)
    assert tuner.probes >= 1 and tuner.changes == [] and machine.count == 2


def test_a_fixed_count_is_set_once_and_never_changes():
    applied = []
    fixed = FixedThreads(2, apply=applied.append, what="train.threads")
    for _ in range(1000):
        fixed.record(2000, 2.0)
    assert applied == [2] and fixed.count == 2 and fixed.describe() == "train.threads: 2 threads, fixed"
    assert fixed.summary() == ""  # nothing to add at the end


def test_settings_and_ladder():
    assert ladder(1) == [1] and ladder(2) == [1, 2] and ladder(6) == [1, 2, 3, 4, 6]
    assert ladder(64) == [1, 2, 3, 4, 8, 16, 32, 64]
    assert parse_setting("auto", "threads") == "auto" and parse_setting(3, "threads") == 3
    assert start_count(3) == 3 and start_count("auto", cpus=8) == 8 and start_count(None, cpus=8) == 8
    for bad in (0, "two", True, 1.5):
        with pytest.raises(UsageError, match="threads must be an integer >= 1 or 'auto'"):
            parse_setting(bad, "threads")


def test_auto_starts_at_the_count_the_cpus_left_free_hold(monkeypatch):
    """Beside two busy neighbours on two CPUs, starting at two threads cost auto 14% of an
    epoch (docs/results.md): the start follows what a moment's watch saw free."""
    applied: list[int] = []
    monkeypatch.setattr(threads_module, "torch_threads", applied.append)

    def start(free: float | None, cpus: int = 2) -> ThreadTuner:
        return ThreadTuner.from_load("train.threads", "tokens", cpus, watch=lambda: free)

    assert start(2.0).count == 2 and start(1.6).count == 2  # alone, or a neighbour's blip
    assert start(1.0).count == 1 and start(0.0).count == 1  # one or two equal-priority loops
    assert start(None).count == 2  # cannot tell: every CPU, as before
    assert start(11.2, cpus=16).count == 8 and start(3.0, cpus=16).count == 3
    assert start(0.3).describe() == (
        "train.threads auto: 1 thread to start (of 2 CPUs, 0.3 free), re-chosen from the measured speed"
    )
    assert start(None).describe().startswith("train.threads auto: 2 threads to start (of 2 CPUs)")
    assert applied == [2, 2, 1, 1, 2, 8, 3, 1, 2]  # each set as its tuner starts
    assert [count_for(f, 6) for f in (0.0, 0.4, 2.5, 4.9, 6.0)] == [1, 1, 3, 4, 6]


def test_idle_cpus_after_a_busy_start_bring_the_second_thread_back():
    """A neighbour that stopped just as the run started: the first window's idle CPU probes 2."""
    machine = Machine(**ALONE)
    tuner = ThreadTuner(
        "train.threads", "tokens", cpus=2, start=1, apply=machine.apply, load=machine.sample, clock=machine.clock
    )
    machine.run(tuner, 30)
    assert tuner.changes == [(1, 2)] and machine.count == 2


REAL = textwrap.dedent("""
    import json, os, subprocess, sys, time
    import torch
    from transformer_cli.host.threads import ThreadTuner, Timing
    from transformer_cli.training.build import training_threads
    from transformer_cli.training.distributed import DistContext
    cpus = sorted(os.sched_getaffinity(0))[:2]
    os.sched_setaffinity(0, cpus)
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    os.sched_setaffinity(busy.pid, cpus[:1])  # one CPU of the two taken by an equal-priority loop
    try:
        time.sleep(0.3)
        start = ThreadTuner.from_load("threads", "steps", cpus=2)  # what train.threads: auto starts at
        tuner = ThreadTuner("threads", "steps", cpus=2, timing=Timing(window_s=0.4, warmup_steps=2,
                                                                      min_gap_s=0.5))
        a = torch.randn(384, 384)
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline and not tuner.changes:
            started = time.perf_counter()
            for _ in range(8):
                a = torch.tanh(a @ a.T / 384)
            tuner.record(1.0, time.perf_counter() - started)
        auto = {"changes": tuner.changes, "count": torch.get_num_threads()}
        # What `tfm train` makes of train.threads: 2 under the same load: it stays.
        fixed = training_threads(2, torch.device("cpu"), DistContext())
        counts = set()
        for _ in range(100):
            started = time.perf_counter()
            a = torch.tanh(a @ a.T / 384)
            fixed.record(1.0, time.perf_counter() - started)
            counts.add(torch.get_num_threads())
        print(json.dumps({"start": start.count, "free": start.free, "auto": auto, "fixed": sorted(counts)}))
    finally:
        busy.kill()
""")


@pytest.mark.slow
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs")
def test_real_steps_beside_a_busy_process_move_auto_to_one_thread_and_leave_a_fixed_count():
    """Real matrix products, a real busy loop pinned to one of the two CPUs, the real load
    counters: auto, watching the CPUs first, starts at one thread; started at two, the threads
    spin-wait for the descheduled one, the tuner measures it and moves; train.threads: 2
    (training_threads, as `tfm train` builds it) stays at 2."""
    r = subprocess.run([sys.executable, "-c", REAL], capture_output=True, text=True, timeout=90)
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    assert result["start"] == 1 and result["free"] < 1.5, result
    assert result["auto"]["changes"][:1] == [[2, 1]] and result["auto"]["count"] == 1, result
    assert result["fixed"] == [2]


def test_the_shared_machine_benchmark_reads_the_runs_summary_line():
    """benchmarks/shared_machine.py bounds what auto cost alone by the time it spent probing,
    read from the lines the tuner writes: the two must not drift apart."""
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "shared_machine.py"
    spec = importlib.util.spec_from_file_location("shared_machine", path)
    assert spec is not None and spec.loader is not None
    benchmark = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(benchmark)
    machine = Machine(**ALONE)
    tuner = tuner_on(machine)
    machine.run(tuner, 1800)
    said = benchmark.auto_summary([tuner.describe(), tuner.summary()])
    assert said["auto_start"] == said["auto_end"] == 2 and said["auto_kept"] == 0
    assert said["auto_probes"] == tuner.probes > 0
    assert said["auto_probe_share"] == pytest.approx(tuner.probe_seconds / tuner.step_seconds, abs=1e-3)
    assert benchmark.auto_summary(["train.threads: 2 threads, fixed"]) == {}
