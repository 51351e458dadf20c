"""`tfm train --nproc-per-node N`: tfm starts the training processes itself, through torch's
own launcher (`torch.distributed.run`, torchrun's code, standalone rendezvous on this machine),
after taking the run's lock. So a multi-process run keeps the exit codes a cron line reads:
75 when another `tfm train` holds the run (before any process starts), 2 for bad input (a
train.init_from that cannot be read is refused before any process starts, too), 1 for a
failure, 130/143 after a signal; the processes' own one-line errors are all that is printed.

The processes run `tfm train` with the same arguments; they learn from `TFM_RUN_LOCK_HOLDER`
(this process's pid, their parent's) that the run is locked for them (run_dir.RunDir.lock).
"""

from __future__ import annotations

import logging
import os
import sys

from ..config import Config
from ..errors import EXIT_FAILURE, EXIT_USAGE, TfmError
from .parent import resolve_parent
from .run_dir import LOCK_HOLDER_ENV, RunDir


class LaunchedRunFailed(TfmError):
    """A process of a run tfm launched failed: its own line said why; this carries the code."""

    def __init__(self, exit_code: int):
        super().__init__("")
        self.exit_code = exit_code


def launch(cfg: Config, run: RunDir, processes: int, train_args: list[str]) -> None:
    """Hold `run`'s lock and run `tfm train train_args` (which read `cfg`) in `processes`
    processes until they end."""
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import get_args_parser
    from torch.distributed.run import run as torch_run

    for name in ("torch.distributed.elastic", "torch.distributed.run"):  # the ranks say what matters
        logging.getLogger(name).setLevel(logging.CRITICAL)
    run.lock()  # busy: exit 75 now, before anything starts
    os.environ[LOCK_HOLDER_ENV] = str(os.getpid())
    args = get_args_parser().parse_args(["--standalone", "--nproc-per-node", str(processes), "--module",
                                         "transformer_cli", "train", *train_args])
    try:
        resolve_parent(cfg, run)  # else each rank would refuse it, and the first to fail decides the code
        torch_run(args)
    except ChildFailedError as e:
        codes = [failure.exitcode for failure in e.failures.values()]
        raise LaunchedRunFailed(_exit_code(codes)) from None
    finally:
        os.environ.pop(LOCK_HOLDER_ENV, None)
        run.unlock()
        sys.stderr.flush()


def _exit_code(codes: list[int]) -> int:
    """One exit code for the processes': bad usage when one said so, else the first failure's;
    only when every process was stopped by a signal (torch reports -n), that signal's 128 + n
    (when one fails, the launcher stops the others with SIGTERM: theirs is not the cause)."""
    if EXIT_USAGE in codes:
        return EXIT_USAGE
    failed = [c for c in codes if c > 0]
    if failed:
        return failed[0]
    signals = [128 - c for c in codes if c < 0]
    return signals[0] if signals else EXIT_FAILURE
