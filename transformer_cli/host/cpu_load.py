"""How busy the CPUs this process runs on are, read from /proc (Linux; no torch imported).

Two figures between two samples, both cheap to read (a few small files, well under a
millisecond), which tell `threads.ThreadTuner` when trying another thread count may pay:

- `waiting`: the share of its running threads' time that this process's threads spent
  runnable but waiting for a CPU (`/proc/self/task/*/schedstat`, the scheduler's own run-delay
  count). Near 0 on a machine of its own or beside work of a lower priority (a `nice 19` job
  yields at once); large beside work of equal or higher priority, which is when two intra-op
  threads spin-wait for each other (docs/results.md, "Running beside other work").
- `idle_cpus`: how many of the CPUs this process may use (its affinity) were idle on average
  (`/proc/stat`); the time of niced processes counts as idle for a process that is not
  niced itself, since they yield to it.
- `present`: the share of the time that the thread taking the samples (the one that runs the
  steps: training's loop, a decode) was on a CPU or waiting for one (its own schedstat). Near
  1 while it trains or decodes, busy machine or not; far below while the process was stopped
  (SIGSTOP, a suspended machine), when its steps' wall time says nothing of the thread count's
  speed.

`free_cpus` watches the machine for a moment before any work starts: how many of the
process's CPUs others left free, so that a run can start at the thread count the machine has
room for instead of measuring its way down from every CPU.

Where /proc lacks them (not Linux, a kernel without schedstats) a sample is None and the
tuner relies on its periodic re-checks alone. In a container, /proc/stat may describe the
host's CPUs: `idle_cpus` is then only a hint, and the tuner's measurements still decide.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

TASKS = Path("/proc/self/task")
STAT = Path("/proc/stat")


@dataclass(frozen=True)
class Sample:
    """Counters at one moment (see `sample`)."""

    at: float  # time.monotonic()
    waited_ns: int  # run-queue wait summed over this process's threads
    idle_ticks: int  # idle time of the CPUs this process may use (clock ticks)
    total_ticks: int  # all time of those CPUs
    cpus: int  # how many CPUs those are
    own_ns: int | None = None  # the sampling thread's time on a CPU plus its run-queue wait


@dataclass(frozen=True)
class Load:
    """What happened between two samples."""

    waiting: float  # share of `threads` threads' wall time spent waiting for a CPU
    idle_cpus: float  # CPUs of this process's set left idle, on average
    present: float = 1.0  # share of the wall time the sampling thread ran or waited to (1: unknown)

    def describe(self) -> str:
        return f"threads waited for a CPU {self.waiting:.0%} of the time, {self.idle_cpus:.1f} CPUs idle"


def _thread_times() -> tuple[int, int | None]:
    """Run-queue wait summed over this process's threads; the calling thread's time on a CPU
    plus its wait (None where its schedstat cannot be read)."""
    waited, own, me = 0, None, str(threading.get_native_id())
    for tid in os.listdir(TASKS):
        try:
            on_cpu, wait = (int(x) for x in (TASKS / tid / "schedstat").read_text().split()[:2])
        except (OSError, IndexError, ValueError):  # a thread that ended meanwhile
            continue
        waited += wait
        if tid == me:
            own = on_cpu + wait
    return waited, own


def _cpu_ticks(allowed: set[int], niced_is_idle: bool) -> tuple[int, int]:
    idle = total = 0
    for line in STAT.read_text().splitlines():
        if not line.startswith("cpu") or line.startswith("cpu "):
            continue
        name, *fields = line.split()
        if int(name[3:]) not in allowed:
            continue
        # user nice system idle iowait irq softirq steal (guest time is inside user and nice)
        ticks = [int(x) for x in fields[:8]]
        total += sum(ticks)
        idle += ticks[3] + ticks[4] + (ticks[1] if niced_is_idle else 0)
    return idle, total


def sample() -> Sample | None:
    """The counters now, or None where /proc does not have them."""
    try:
        allowed = os.sched_getaffinity(0)
        niced_is_idle = os.getpriority(os.PRIO_PROCESS, 0) <= 0
        waited, own = _thread_times()
        idle, total = _cpu_ticks(allowed, niced_is_idle)
    except (OSError, AttributeError, ValueError, IndexError):
        return None
    return Sample(time.monotonic(), waited, idle, total, len(allowed), own)


def between(first: Sample, last: Sample, threads: int) -> Load:
    """The load from `first` to `last` for a process running `threads` threads."""
    wall_ns = max(1.0, (last.at - first.at) * 1e9)
    waiting = max(0, last.waited_ns - first.waited_ns) / (wall_ns * max(1, threads))
    ticks = last.total_ticks - first.total_ticks
    idle = (last.idle_ticks - first.idle_ticks) / ticks * last.cpus if ticks > 0 else 0.0
    present = 1.0
    if first.own_ns is not None and last.own_ns is not None:
        present = min(1.0, max(0, last.own_ns - first.own_ns) / wall_ns)
    return Load(round(min(1.0, waiting), 4), round(max(0.0, idle), 3), round(present, 3))


def free_cpus(seconds: float = 0.3) -> float | None:
    """How many of this process's CPUs nothing else used over the next `seconds` (spent
    asleep; the little this process itself uses meanwhile counts as free; niced work counts as
    free for a process that is not niced), or None where /proc lacks the counters."""
    first, before = sample(), os.times()
    time.sleep(seconds)
    last, after = sample(), os.times()
    if first is None or last is None or last.at <= first.at:
        return None
    own = max(0.0, (after.user - before.user) + (after.system - before.system)) / (last.at - first.at)
    return round(min(float(last.cpus), between(first, last, 1).idle_cpus + own), 3)
