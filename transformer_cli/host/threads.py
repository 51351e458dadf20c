"""`threads: auto`: torch's intra-op threads re-chosen during a run from its measured speed.

On a machine of its own a CPU job is fastest with a thread per CPU; beside work of equal
priority two intra-op threads spin-wait for each other whenever one is descheduled, and
training falls to a third of its speed, below what one thread keeps (docs/results.md,
"Running beside other work"). The load changes during a night, so no fixed number is right.

`ThreadTuner` starts at the count the machine has room for (`ThreadTuner.from_load`: the
CPUs others left free over a moment before the run, `cpu_load.free_cpus`), or at every CPU.
It is told the work and the wall time of each step (training: its target tokens;
decoding: a batch's source and output tokens) and keeps the thread count that is fastest
now:

1. It measures the current count over windows of at least `Timing.window_s` seconds and
   `window_steps` steps (after `warmup_steps` at the start and `settle_steps` after each
   change, while the thread pool and the kernels' caches warm up), and reads the CPU load
   over each window (cpu_load.py).
2. It probes a neighbouring count for one window when the load says it may pay (its threads
   waited for a CPU: try fewer; CPUs stood idle: try more), and in any case every
   `recheck_s` seconds (doubling while nothing changes). Beside heavy load (`strong_waiting`
   already over the warm-up) it probes fewer threads right after the warm-up. A re-check
   without a load signal compares windows of `recheck_window_s` (the current count's, then
   the probe's): alone, one thread is ~0.6x two, less than the speed of one-second windows
   of real batches varies (one such window at one thread once measured 1.29x the two
   threads' window before it, and the re-check kept the slower count for 21 s).
3. It keeps the probed count only when it was faster per unit of work by more than `margin`
   than the window just before it; otherwise it goes back. A probe that changed nothing
   doubles the wait before the next probe the load may trigger (up to `max_gap_s`), so an
   undecided machine is not probed over and over.

A window in which the thread running the steps neither ran nor waited for a CPU for half its
time (`min_present`; cpu_load's `present`) measured a stopped process, not a thread count: SIGSTOP
or a suspended machine puts the whole stop into one step's time. It is left out, as a pause
between steps is; before, a stop during a probe read as ~1% of the speed, and the tuner
switched for the 8-35 s until its next window undid it.

Each change is one log line. A fixed number (`FixedThreads`) never changes. Nothing here
imports torch until a count is applied (`torch_threads`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, Protocol

from ..errors import UsageError
from . import cpu_load
from .machine import available_cpus

log = logging.getLogger("tfm")

AUTO = "auto"
Setting = int | Literal["auto"] | None  # a config's value: a number fixes it; auto (or null) tunes


@dataclass(frozen=True)
class Timing:
    """The tuner's windows and thresholds (the defaults suit training and long decodes)."""

    window_s: float = 1.0  # a measurement lasts at least this long...
    window_steps: int = 1  # ...and this many steps
    warmup_steps: int = 1  # steps left out at the start (first shapes, workers starting)
    settle_steps: int = 1  # steps left out after each change of the count
    margin: float = 0.10  # a probed count must be this much faster to be kept
    waiting: float = 0.15  # the threads waited for a CPU this share of the time: try fewer
    strong_waiting: float = 0.5  # ...this much already by the end of the warm-up: try fewer at once
    idle_cpus: float = 0.6  # this many of the process's CPUs stood idle: try more
    min_gap_s: float = 5.0  # after a change, the next probe the load may trigger waits this long
    max_gap_s: float = 120.0  # ...doubling after each probe that changed nothing, up to this
    recheck_s: float = 300.0  # a probe without a load signal after this long (doubling)
    max_recheck_s: float = 1800.0
    recheck_window_s: float = 10.0  # ...measured, with the window before it, over this long
    min_present: float = 0.5  # a window whose stepping thread ran (or waited to) less is no measurement


class Threads(Protocol):
    """What a loop tells about its steps: the work done and the wall time it took."""

    @property
    def count(self) -> int: ...

    def record(self, work: float, seconds: float) -> None: ...

    def describe(self) -> str: ...

    def summary(self) -> str: ...


class FixedThreads:
    """A fixed count: set once, never changed. `what` and `why` name it in `describe()`."""

    def __init__(self, count: int, apply: Callable[[int], None] | None = None, what: str = "threads", why: str = ""):
        self.count, self.what, self.why = count, what, why
        (apply or torch_threads)(count)

    def record(self, work: float, seconds: float) -> None:
        pass

    def describe(self) -> str:
        return f"{self.what}: {_n(self.count)}, fixed" + (f" ({self.why})" if self.why else "")

    def summary(self) -> str:
        return ""  # nothing happened that describe() did not say


def torch_threads(count: int) -> None:
    """Set torch's intra-op threads (process-wide; takes effect at the next operation)."""
    import torch

    torch.set_num_threads(count)


def ladder(cpus: int) -> list[int]:
    """The counts worth trying on `cpus` CPUs: every count up to 4, then powers of two and
    `cpus` itself."""
    counts = {n for n in range(1, min(cpus, 4) + 1)} | {cpus}
    n = 8
    while n < cpus:
        counts.add(n)
        n *= 2
    return sorted(counts)


def parse_setting(value: object, what: str) -> Setting:
    """`auto`, None or an integer >= 1 (a UsageError naming `what` otherwise)."""
    if value is None or value == AUTO:
        return value  # type: ignore[return-value]
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return value
    raise UsageError(f"{what} must be an integer >= 1 or '{AUTO}' (got {value!r})")


def count_for(free: float, cpus: int) -> int:
    """The largest count worth trying on `cpus` CPUs that `free` free CPUs (to the nearest
    whole one) hold; 1 when none is free."""
    room = max(1, int(free + 0.5))
    return max(n for n in ladder(cpus) if n <= room)


def start_count(setting: Setting, cpus: int | None = None) -> int:
    """The count a setting starts with: the number given, else every CPU this process may use."""
    return setting if isinstance(setting, int) else (cpus or available_cpus())


class ThreadTuner:
    """Chooses the thread count from measured step times (see the module docstring).

    `what` names the setting in log lines ("train.threads"), `unit` the work ("tokens").
    `load` and `clock` are cpu_load.sample and time.monotonic, replaceable for tests."""

    def __init__(
        self,
        what: str,
        unit: str,
        cpus: int | None = None,
        start: int | None = None,
        apply: Callable[[int], None] | None = None,
        timing: Timing | None = None,
        load: Callable[[], cpu_load.Sample | None] = cpu_load.sample,
        clock: Callable[[], float] = time.monotonic,
        free: float | None = None,
    ):
        self.what, self.unit, self.free = what, unit, free
        self.candidates = ladder(cpus or available_cpus())
        self.current = start if start in self.candidates else self.candidates[-1]
        self.timing = timing or Timing()
        self._apply, self._load, self._clock = apply or torch_threads, load, clock
        self.count = self.current  # in use now: the current count, or the one being probed
        self.changes: list[tuple[int, int]] = []  # (from, to) of every change kept
        self.probes = 0  # windows spent measuring another count, kept or not
        self.step_seconds = 0.0  # every recorded step's wall time...
        self.probe_seconds = 0.0  # ...and the part of it at a probed count (the most probing can cost)
        self._apply(self.count)
        self._skip = self.timing.warmup_steps
        self._warming = self._skip > 0  # the warm-up steps: measured, compared only on a strong sign
        self._probe: int | None = None
        self._window_s = self.timing.window_s  # the window being measured: longer for a re-check
        self._reference = 0.0  # the current count's rate in the window before a probe
        self._reference_load: cpu_load.Load | None = None
        self._last_probe = -float("inf")
        self._gap = 0.0  # before the first probe the load may trigger: none
        self._recheck = self.timing.recheck_s
        self._started = self._clock()
        self._next_timed_down = True
        self._begin()

    @classmethod
    def from_load(
        cls,
        what: str,
        unit: str,
        cpus: int | None = None,
        watch: Callable[[], float | None] = cpu_load.free_cpus,
    ) -> ThreadTuner:
        """A tuner that starts at the count the CPUs left free by others hold, watched for a
        moment now (`watch`; every CPU where it cannot tell): beside two busy neighbours on
        two CPUs the first steps at two threads ran 5x slower than at one (docs/results.md,
        "Training that adapts to the machine")."""
        cpus = cpus or available_cpus()
        free = watch()
        return cls(what, unit, cpus, start=cpus if free is None else count_for(free, cpus), free=free)

    def summary(self) -> str:
        """What the run did, for its last lines: the count it ended at, what it tried, and the
        share of the steps' time spent at probed counts (a bound on what probing cost)."""
        return (
            f"{self.what} auto: {_n(self.current)} at the end; {self.probes} "
            f"{'probe' if self.probes == 1 else 'probes'} of another count "
            f"({self.probe_seconds:,.1f} s of {self.step_seconds:,.0f} s of steps), {len(self.changes)} kept"
        )

    def describe(self) -> str:
        free = "" if self.free is None else f", {self.free:.1f} free"
        return (
            f"{self.what} auto: {_n(self.count)} to start (of {self.candidates[-1]} CPUs{free}), "
            f"re-chosen from the measured speed"
        )

    # ------------------------------------------------------------------ measuring
    def _begin(self) -> None:
        self._work = self._seconds = 0.0
        self._steps = 0
        self._window_start = self._clock()
        self._sample = self._load()

    def record(self, work: float, seconds: float) -> None:
        """One step: its work (in `unit`) and wall time."""
        self.step_seconds += seconds
        if self.count != self.current:
            self.probe_seconds += seconds
        if self._skip > 0:
            self._skip -= 1
            if self._warming:
                self._work, self._seconds = self._work + work, self._seconds + seconds
            if self._skip == 0:
                self._after_warmup() if self._warming else self._begin()
            return
        self._work += work
        self._seconds += seconds
        self._steps += 1
        t = self.timing
        if self._steps < t.window_steps or self._seconds < self._window_s:
            return
        now = self._clock()
        if now - self._window_start > 1.5 * self._seconds + 1.0:  # a pause (validation, a save)
            self._begin()
            return
        rate = self._work / max(self._seconds, 1e-9)
        end = self._load()
        load = cpu_load.between(self._sample, end, self.count) if self._sample is not None and end is not None else None
        if load is not None and load.present < t.min_present:  # stopped (SIGSTOP, a suspend) meanwhile
            log.debug("%s auto: a window left out: the process ran %.0f%% of it", self.what, 100 * load.present)
            self._begin()
            return
        if self._probe is not None:
            self._conclude(rate, load, now)
        else:
            self._consider(rate, load, now)
        self._begin()

    # ------------------------------------------------------------------ deciding
    def _after_warmup(self) -> None:
        """Beside heavy load the warm-up steps already crawl: then the next count down is
        probed at once, against their speed (slow for a first step anyway: this errs towards
        fewer threads, which idle CPUs undo)."""
        self._warming = False
        end = self._load()
        load = cpu_load.between(self._sample, end, self.count) if self._sample and end else None
        target = self._neighbour(down=True)
        if load is not None and load.waiting >= self.timing.strong_waiting and target is not None:
            self._reference, self._reference_load = self._work / max(self._seconds, 1e-9), load
            self._start_probe(target)
        self._begin()

    def _neighbour(self, down: bool) -> int | None:
        i = self.candidates.index(self.current) + (-1 if down else 1)
        return self.candidates[i] if 0 <= i < len(self.candidates) else None

    def _consider(self, rate: float, load: cpu_load.Load | None, now: float) -> None:
        """A window of the current count: probe a neighbour if the load or the time says so."""
        self._reference, self._reference_load = rate, load
        t, target = self.timing, None
        if load is not None and now >= self._last_probe + self._gap:
            if load.waiting >= t.waiting:
                target = self._neighbour(down=True)
            elif load.idle_cpus >= t.idle_cpus:
                target = self._neighbour(down=False)
        if target is None and now >= max(self._last_probe, self._started) + max(self._recheck, self._gap):
            if self._window_s < t.recheck_window_s:  # first the current count over a long window
                self._window_s = t.recheck_window_s
                return
            down, self._next_timed_down = self._next_timed_down, not self._next_timed_down
            target = self._neighbour(down) or self._neighbour(not down)
            self._recheck = min(self._recheck * 2, t.max_recheck_s)
        if target is not None:
            self._start_probe(target)

    def _start_probe(self, target: int) -> None:
        self._probe = target
        self.probes += 1
        self._set(target)

    def _conclude(self, rate: float, load: cpu_load.Load | None, now: float) -> None:
        """A probe's window: keep its count if it was faster by the margin, else go back."""
        probe, previous = self._probe, self.current
        assert probe is not None
        self._probe, self._last_probe = None, now
        self._window_s = self.timing.window_s
        if rate > self._reference * (1 + self.timing.margin):
            self.current = probe
            self.changes.append((previous, probe))
            self._gap, self._recheck = self.timing.min_gap_s, self.timing.recheck_s
            why = self._reference_load.describe() if self._reference_load is not None else "re-checked"
            log.info(
                "%s auto: %s now (%s %s/s against %s with %s; %s)",
                self.what,
                _n(probe),
                f"{rate:,.0f}",
                self.unit,
                f"{self._reference:,.0f}",
                _n(previous),
                why,
            )
            return
        self._gap = min(max(self._gap * 2, self.timing.min_gap_s), self.timing.max_gap_s)
        log.debug(
            "%s auto: kept %s (%.0f %s/s; %s: %.0f)",
            self.what,
            _n(previous),
            self._reference,
            self.unit,
            _n(probe),
            rate,
        )
        self._set(previous)

    def _set(self, count: int) -> None:
        self.count = count
        self._apply(count)
        self._skip = max(self.timing.settle_steps, 0)
        if self._skip == 0:
            self._begin()


def _n(count: int) -> str:
    return f"{count} thread" + ("" if count == 1 else "s")
