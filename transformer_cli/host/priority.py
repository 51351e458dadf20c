"""Who waits when the CPUs are busy: `train.priority`, applied to this process at `tfm train`'s
start (Linux; no torch imported).

- `normal`: as started (a `nice` on the command line still counts).
- `low`: niceness 10 (kept if it was higher already), `SCHED_BATCH` (the scheduler treats the
  threads as CPU-bound: they do not preempt others when they wake) and I/O best-effort at the
  lowest level. Beside `tfm serve` the server's threads get about 90% of a CPU both want and
  preempt training when a request arrives; with the machine otherwise idle, training runs at
  full speed.
- `idle`: `SCHED_IDLE`: the threads run only on CPUs that nothing else of normal priority
  wants (a `nice 19` job included), I/O as for `low`. The strongest precedence for a server,
  but under sustained other load training may all but stop.

On Linux niceness and scheduling policy belong to each thread: they are set for every thread
the process has and inherited by those it starts later (torch's thread pool, the DataLoader
workers, the processes `--nproc-per-node` starts). Nothing is ever raised above where it
stands (an unprivileged process could not undo it). Where a setting is not available
(another OS, an architecture without a known `ioprio_set` number) it is left out and
`describe()` says what holds.
"""

from __future__ import annotations

import ctypes
import logging
import os
import platform
from typing import Literal, get_args

log = logging.getLogger("tfm")

Priority = Literal["normal", "low", "idle"]
PRIORITIES: tuple[str, ...] = get_args(Priority)
LOW_NICE = 10
IDLE_NICE = 19
# ioprio_set/ioprio_get syscall numbers (no libc wrapper exists).
_IOPRIO_SYSCALLS = {"x86_64": (251, 252), "aarch64": (30, 31), "arm64": (30, 31)}
IOPRIO_WHO_PROCESS = 1
IOPRIO_CLASS_SHIFT = 13
IOPRIO_CLASSES = {0: "none", 1: "real-time", 2: "best-effort", 3: "idle"}
IOPRIO_BEST_EFFORT_LOWEST = (2 << IOPRIO_CLASS_SHIFT) | 7


def _threads() -> list[int]:
    try:
        return [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:
        return [0]


def _ioprio(call: int, *args: int) -> int | None:
    numbers = _IOPRIO_SYSCALLS.get(platform.machine())
    if numbers is None:
        return None
    libc = ctypes.CDLL(None, use_errno=True)
    result = libc.syscall(numbers[call], *[ctypes.c_long(a) for a in args])
    return None if result < 0 else int(result)


def io_priority(tid: int = 0) -> int | None:
    """The I/O priority of a thread (ioprio_get's value), None where it cannot be read."""
    return _ioprio(1, IOPRIO_WHO_PROCESS, tid)


def apply(priority: str) -> None:
    """Apply `priority` (PRIORITIES) to every thread of this process (see the module docstring)."""
    if priority == "normal":
        return
    nice = LOW_NICE if priority == "low" else IDLE_NICE
    policy = getattr(os, "SCHED_BATCH" if priority == "low" else "SCHED_IDLE", None)
    for tid in _threads():
        try:
            if os.getpriority(os.PRIO_PROCESS, tid) < nice:
                os.setpriority(os.PRIO_PROCESS, tid, nice)
            if policy is not None and os.sched_getscheduler(tid) not in (policy, getattr(os, "SCHED_IDLE", -1)):
                os.sched_setscheduler(tid, policy, os.sched_param(0))
        except ProcessLookupError:  # a thread that ended meanwhile
            continue
        except (OSError, AttributeError) as e:
            log.warning("train.priority %s: could not lower the priority of thread %d (%s)", priority, tid, e)
            continue
        current = io_priority(tid)
        if current is not None and (current >> IOPRIO_CLASS_SHIFT) != 3:  # idle I/O stays idle
            _ioprio(0, IOPRIO_WHO_PROCESS, tid, IOPRIO_BEST_EFFORT_LOWEST)


def describe() -> str:
    """This thread's niceness, scheduling policy and I/O priority, e.g. "nice 10, SCHED_BATCH,
    I/O best-effort 7"."""
    parts = [f"nice {os.getpriority(os.PRIO_PROCESS, 0)}"]
    if hasattr(os, "sched_getscheduler"):
        policy = os.sched_getscheduler(0)
        names = {
            getattr(os, n): n
            for n in ("SCHED_OTHER", "SCHED_BATCH", "SCHED_IDLE", "SCHED_FIFO", "SCHED_RR")
            if hasattr(os, n)
        }
        parts.append(names.get(policy, f"policy {policy}"))
    io = io_priority()
    if io is not None:
        klass = io >> IOPRIO_CLASS_SHIFT
        parts.append("I/O default" if klass == 0 else f"I/O {IOPRIO_CLASSES.get(klass, klass)} {io & 7}")
    return ", ".join(parts)
