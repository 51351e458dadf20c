"""Errors that the CLI turns into one-line messages and documented exit codes.

Exit codes (also in README.md and docs/reliability.md):

====  ==========================================================
0     success
1     failure at run time (disk full, unreadable checkpoint, bug)
2     bad usage, config or input
75    busy: another process holds the run's lock (EX_TEMPFAIL)
130   stopped by SIGINT after saving a resumable checkpoint
143   stopped by SIGTERM after saving a resumable checkpoint
====  ==========================================================
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_BUSY = 75


class TfmError(Exception):
    """An expected failure: its message is shown as one line, then tfm exits with `exit_code`."""

    exit_code = EXIT_FAILURE


class UsageError(TfmError):
    """Bad config, option, or input data (exit 2)."""

    exit_code = EXIT_USAGE


class BusyError(TfmError):
    """The run directory is locked by another live process (exit 75)."""

    exit_code = EXIT_BUSY


class StoppedBySignal(TfmError):
    """Training stopped on SIGTERM/SIGINT after saving a resumable checkpoint (exit 128+signum)."""

    def __init__(self, signum: int, message: str):
        super().__init__(message)
        self.exit_code = 128 + signum
