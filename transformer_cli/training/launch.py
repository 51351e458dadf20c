"""`tfm train --nproc-per-node N`: tfm starts the training processes itself, through torch's
own launcher (`torch.distributed.run`, torchrun's code, standalone rendezvous on this machine),
after taking the run's lock. So a multi-process run keeps the exit codes a cron line reads:
75 when another `tfm train` holds the run (before any process starts), 2 for bad input (a
train.init_from that cannot be read is refused before any process starts, too), 1 for a
failure, 130/143 after SIGINT/SIGTERM (torch's launcher passes the signal on to the processes,
which save and stop); the processes' own one-line errors are all that is printed, and none of
torch's launcher's report. A process killed by a signal (SIGKILL, the out-of-memory killer, a
crash) says nothing itself: the launcher says which in one line, and exits 1.

The processes run `tfm train` with the same arguments; they learn from `TFM_RUN_LOCK_HOLDER`
(this process's pid, their parent's) that the run is locked for them (run_dir.RunDir.lock).
"""

from __future__ import annotations

import logging
import os
import signal
import sys

from ..config import Config
from ..errors import EXIT_FAILURE, EXIT_USAGE, StoppedBySignal, TfmError
from .parent import resolve_parent
from .peer_watch import EVERY_S, GRACE_S
from .run_dir import LOCK_HOLDER_ENV, RunDir

MONITOR_S = EVERY_S + GRACE_S + 0.5  # past the longest a peer watch takes to say a process is gone
# The loggers of torch's launcher (and every logger below them, made now or later).
TORCH_LAUNCHER_LOGGERS = ("torch.distributed.elastic", "torch.distributed.run", "torch.distributed.launcher")
# What a process exits with when it stopped on a signal by itself (it saved first): torch's
# launcher stops the others of a failed run with SIGTERM, so these are no cause of a failure.
STOPPED_CODES = tuple(128 + s for s in (signal.SIGTERM, signal.SIGINT))


class LaunchedRunFailed(TfmError):
    """A process of a run tfm launched failed: its own line said why (an empty message), or
    the launcher says what killed it; this carries the code."""

    def __init__(self, exit_code: int, message: str = ""):
        super().__init__(message)
        self.exit_code = exit_code


def launch(cfg: Config, run: RunDir, processes: int, train_args: list[str]) -> None:
    """Hold `run`'s lock and run `tfm train train_args` (which read `cfg`) in `processes`
    processes until they end."""
    from torch.distributed.elastic.multiprocessing import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import get_args_parser
    from torch.distributed.run import run as torch_run

    quiet_torch_launcher()
    run.lock()  # busy: exit 75 now, before anything starts
    os.environ[LOCK_HOLDER_ENV] = str(os.getpid())
    # The launcher looks at its processes every MONITOR_S: a process's death is then said by
    # the others first (their failed collective at once, or their peer watch), not cut short by
    # the launcher's SIGTERM a tenth of a second after it (torch's default), which under load
    # came first and left only the launcher's line.
    monitor = ["--monitor-interval", str(MONITOR_S)]
    args = get_args_parser().parse_args(
        [
            "--standalone",
            *monitor,
            "--nproc-per-node",
            str(processes),
            "--module",
            "transformer_cli",
            "train",
            *train_args,
        ]
    )
    try:
        resolve_parent(cfg, run)  # else each rank would refuse it, and the first to fail decides the code
        torch_run(args)  # type: ignore[no-untyped-call]  # torch leaves it unannotated
    except ChildFailedError as e:
        raise failure({rank: f.exitcode for rank, f in e.failures.items()}) from None
    except SignalException as e:  # SIGTERM/SIGINT here: torch passed it on, the processes have stopped
        raise StoppedBySignal(int(e.sigval), "") from None  # (rank 0 said where the state is saved)
    finally:
        os.environ.pop(LOCK_HOLDER_ENV, None)
        run.unlock()
        sys.stderr.flush()


def quiet_torch_launcher() -> None:
    """Keep torch's launcher's log records (a warning on every signal, an error report on every
    failure) off stderr: they stop at its top loggers, whatever level the loggers below set."""
    for name in TORCH_LAUNCHER_LOGGERS:
        logger = logging.getLogger(name)
        logger.propagate = False
        logger.handlers[:] = [logging.NullHandler()]


def failure(codes: dict[int, int]) -> LaunchedRunFailed:
    """The failure of a run whose processes ended with `codes` (global rank -> exit code; -N:
    killed by signal N) while the launcher itself was not signalled.

    Bad usage when a process said so (2); else a process killed by a signal is the cause (exit 1,
    one line naming the rank and the signal; the others' SIGTERM is torch's launcher stopping
    them); else the first failure's own code, one that is not a stop the launcher asked for
    before one that is."""
    if EXIT_USAGE in codes.values():
        return LaunchedRunFailed(EXIT_USAGE)
    killed = {rank: -code for rank, code in codes.items() if code < 0}
    causes = {rank: signum for rank, signum in killed.items() if signum != signal.SIGTERM}
    failed = sorted((code in STOPPED_CODES, rank, code) for rank, code in codes.items() if code > 0)
    if causes or (killed and not failed):
        rank, signum = min((causes or killed).items())
        return LaunchedRunFailed(
            EXIT_FAILURE,
            f"rank {rank} was killed by {signal_text(signum)}; the "
            "last saved state is kept: run the same command to resume",
        )
    return LaunchedRunFailed(failed[0][2] if failed else EXIT_FAILURE)


def signal_text(signum: int) -> str:
    """ "signal 9 (SIGKILL)"; a signal without a name (a real-time one) by its number."""
    try:
        return f"signal {signum} ({signal.Signals(signum).name})"
    except ValueError:
        return f"signal {signum}"
