"""What the machine gives this process (no torch imported)."""

from __future__ import annotations

import os


def available_cpus() -> int:
    """The CPUs this process may run on (its affinity: `taskset` and container CPU sets are
    respected), at least 1. Training threads, preprocessing and DataLoader workers, and the
    server's threads are counted from it."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not Linux
        return max(1, os.cpu_count() or 1)
