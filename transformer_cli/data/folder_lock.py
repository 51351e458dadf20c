"""Readers and rebuilders of a prepared data folder agree through a lock file beside it.

`data/<name>/` is replaced as a whole when it is rebuilt (`fsutil.atomic_write_folder`), which
would pull it from under a process reading it: `tfm train` reads its shards through memory
maps for hours, and a nightly `tfm train` and a `tfm evaluate` may share the folder. So a
process holds a shared `flock` on `data/.<name>.lock` while it uses the folder (`tfm train`
on every rank for its whole session; `tfm preprocess` and `tfm evaluate` while they check it
and read from it), and a rebuild takes it exclusively, without waiting: while another process reads
the folder a rebuild is refused (BusyError, exit 75), and the folder is left as it is. A
process that arrives while another rebuilds waits for the rebuild to end (it then finds the
folder current) and honours stop signals meanwhile.

Holds are counted per folder within a process (`hold_shared` ... `release`); the lock goes
when the last is released or the process dies (the kernel drops it). Forked workers close
their copies of the descriptor, so a worker that outlives its parent keeps nothing locked.
The empty lock file stays beside the folder.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from ..errors import BusyError, TfmError
from ..fsutil import close_lock, track_lock

log = logging.getLogger("tfm")
POLL_S = 0.2  # how often a wait for a rebuild checks again (and checks for a stop)

# One descriptor per lock file in this process, with the number of holds on it: flock treats
# two descriptors of one process as two holders, so a second one would make the process's own
# shared lock refuse its rebuild. A forked child closes the descriptors (fsutil.track_lock)
# and forgets them.
_HELD: dict[Path, list[int]] = {}  # lock file -> [descriptor, holds]
os.register_at_fork(after_in_child=_HELD.clear)


def lock_file(folder: Path) -> Path:
    folder = Path(folder)
    return folder.with_name(f".{folder.name}.lock")


def _descriptor(folder: Path) -> int:
    path = lock_file(folder).absolute()
    if path not in _HELD:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            _HELD[path] = [os.open(path, os.O_RDWR | os.O_CREAT, 0o644), 0]
            track_lock(_HELD[path][0])
        except OSError as e:
            raise TfmError(
                f"cannot open the lock file {path}: {e.strerror} (the data folder's "
                "parent must be writable; see data.dir)"
            ) from None
    return _HELD[path][0]


def _try(fd: int, operation: int) -> bool:
    try:
        fcntl.flock(fd, operation | fcntl.LOCK_NB)
        return True
    except OSError as e:
        if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            return False
        raise TfmError(f"cannot lock the data folder: {e.strerror}") from None


def hold_shared(folder: Path, check_stop: Callable[[], None] | None = None) -> None:
    """Hold `folder` for reading until a matching `release` (or this process's exit). Waits
    while another process rebuilds it, calling `check_stop` (it may raise) between tries."""
    _share(folder, check_stop)
    _HELD[lock_file(folder).absolute()][1] += 1


def release(folder: Path) -> None:
    """End one `hold_shared`; the last one unlocks the folder."""
    held = _HELD.get(lock_file(folder).absolute())
    if held is None:
        return
    held[1] -= 1
    if held[1] <= 0:
        del _HELD[lock_file(folder).absolute()]
        close_lock(held[0])


def _share(folder: Path, check_stop: Callable[[], None] | None = None) -> None:
    """Take (or return to) the shared lock, waiting out a rebuild by another process."""
    fd = _descriptor(folder)
    if _try(fd, fcntl.LOCK_SH):
        return
    log.info("waiting for another tfm process to finish rebuilding %s", folder)
    while not _try(fd, fcntl.LOCK_SH):
        if check_stop is not None:
            check_stop()
        time.sleep(POLL_S)


@contextlib.contextmanager
def rebuilding(folder: Path, check_stop: Callable[[], None] | None = None) -> Iterator[None]:
    """Hold `folder` alone while the block rebuilds it, then for reading again (inside a
    `hold_shared`). Raises BusyError at once when another process holds it."""
    fd = _descriptor(folder)
    if not _try(fd, fcntl.LOCK_EX):
        # flock converts a lock by dropping it first: hold the folder for reading again.
        _share(folder, check_stop)
        raise BusyError(
            f"cannot rebuild {folder}: another tfm process (a tfm train or tfm "
            "evaluate) is using it; run this again when that process has finished, "
            "or give this config another data.dir"
        )
    try:
        yield
    finally:
        _share(folder)
