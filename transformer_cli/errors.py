"""Errors that the CLI turns into one-line messages and documented exit codes.

Exit codes of every command (also in docs/cron.md and docs/reliability.md):

====  ==========================================================
0     success (`tfm serve`: also when stopped by SIGTERM/SIGINT)
1     failure at run time (disk full, unreadable checkpoint, a lost
      torchrun peer, a process of `tfm train --nproc-per-node` killed
      by a signal, a bug)
2     bad usage, config or input
75    busy: another process holds the run's lock (EX_TEMPFAIL)
130   stopped by SIGINT (training saved a resumable checkpoint;
      preprocessing and export kept nothing half-done)
141   stdout's reader left (`tfm feedback list | head -1`): the
      command ended quietly, as Unix tools do on SIGPIPE
143   stopped by SIGTERM (as by SIGINT)
====  ==========================================================
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_BUSY = 75
EXIT_STDOUT_CLOSED = 141  # 128 + SIGPIPE


def first_line(error: BaseException) -> str:
    """The first line of an error's message, or its type's name when the message is empty."""
    text = str(error)
    return text.splitlines()[0] if text.strip() else type(error).__name__


def made_from(error: BaseException, kind: type[BaseException]) -> bool:
    """Whether `error` is a `kind` or was raised from or while handling one, however far back:
    the code an interrupt lands in may make another error of it (pybind11 turns a
    KeyboardInterrupt raised while its extension module initialises into `ImportError:
    initialization failed`, which `import_extra` then reports as a missing extra)."""
    seen: set[int] = set()
    found: BaseException | None = error
    while found is not None and id(found) not in seen:
        if isinstance(found, kind):
            return True
        seen.add(id(found))
        found = found.__cause__ or found.__context__
    return False


class TfmError(Exception):
    """An expected failure: its message is shown as one line, then tfm exits with `exit_code`."""

    exit_code = EXIT_FAILURE


class UsageError(TfmError):
    """Bad config, option, or input data (exit 2)."""

    exit_code = EXIT_USAGE


def check_choice(name: str, value: object, choices: tuple[str, ...]) -> None:
    """Refuse a value outside `choices` (None: not given), naming it `name` as the caller
    spelled it (an option, a keyword argument)."""
    if value is not None and value not in choices:
        raise UsageError(f"{name} must be {', '.join(choices[:-1])} or {choices[-1]} (got {value!r})")


class BusyError(TfmError):
    """A run directory or data folder is held by another live process (exit 75)."""

    exit_code = EXIT_BUSY


class StoppedBySignal(TfmError):
    """Stopped on SIGTERM/SIGINT at a safe point (exit 128+signum): training after saving a
    resumable checkpoint, preprocessing and export with nothing half-done kept."""

    def __init__(self, signum: int, message: str):
        super().__init__(message)
        self.exit_code = 128 + signum
