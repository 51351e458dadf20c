"""A translation cache's folder (synthetic/cache.py) while it is used and when it is removed:
every process with the cache open holds a shared flock() of its `.in-use` file, and a remover
(synthetic/lineage.py's pruning) takes it exclusively, without waiting, only to rename the folder
to a `.pruned-` name beside it, then deletes that; a crash halfway leaves a `.pruned-` folder,
never read as a cache, which the next remover deletes (`remove_leftovers`)."""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import shutil
import uuid
from pathlib import Path

from ..errors import TfmError
from ..fsutil import close_lock, fsync_dir, track_lock

log = logging.getLogger("tfm")
IN_USE = ".in-use"  # flock()ed shared by the processes that have the cache open
REMOVED = ".pruned-"  # a folder being removed is renamed to this prefix first: never read


def use(folder: Path, create: bool) -> int | None:
    """A descriptor of `folder`'s `.in-use`, flock()ed shared: the folder is not removed while
    it is held. The folder made first when `create`; else None when there is none (or it was
    renamed away for removal before the share was held)."""
    path = folder / IN_USE
    for _ in range(1000):  # (a folder removed as often as it is made: no end)
        try:
            if create:
                folder.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except FileNotFoundError:  # the folder is gone (being removed)
            if create:
                continue
            return None
        except OSError as e:
            raise TfmError(f"cannot create the translation cache {folder}: {e.strerror}") from None
        track_lock(fd)
        fcntl.flock(fd, fcntl.LOCK_SH)  # (a pruner holds it exclusively only to rename the folder)
        try:
            current = os.path.samestat(os.fstat(fd), os.stat(path))
        except FileNotFoundError:
            current = False
        if current:
            return fd
        close_lock(fd)  # renamed away meanwhile: that folder is being removed
        if not create:
            return None
    raise TfmError(f"cannot create the translation cache {folder}: it is removed as soon as it is made")


def let_go(fd: int, pid: int) -> None:
    """Close `use`'s descriptor in the process that opened it (a forked child closed its copy
    at the fork: fsutil.track_lock; the number may name another file there since)."""
    if os.getpid() == pid:
        close_lock(fd)


def remove(folder: Path) -> int | None:
    """Remove the cache `folder` unless a process has it open: renamed to a `.pruned-` name
    beside it first (what a crash leaves half removed is never read as a cache:
    `remove_leftovers`), then deleted. Returns the bytes freed (0: there was no such folder),
    or None when it is in use (left as it is). Call it under a lock that keeps other removers
    out (the cache root's: synthetic/lineage.py)."""
    try:
        fd = os.open(folder / IN_USE, os.O_RDWR | os.O_CREAT, 0o644)
    except FileNotFoundError:
        return 0
    except OSError as e:
        raise TfmError(f"cannot remove the translation cache {folder}: {e.strerror}") from None
    track_lock(fd)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return None
        away = folder.with_name(f"{REMOVED}{folder.name}-{uuid.uuid4().hex[:8]}")
        try:
            os.rename(folder, away)
        except OSError as e:
            raise TfmError(f"cannot remove the translation cache {folder}: {e.strerror}") from None
        fsync_dir(folder.parent)
    finally:
        close_lock(fd)
    size = folder_bytes(away)
    _delete(away)
    return size


def remove_leftovers(root: Path) -> None:
    """Delete what `remove` left half deleted in the cache root `root` (its process died);
    under the same lock as `remove`."""
    for away in root.glob(f"{REMOVED}*"):
        _delete(away)


def folder_bytes(folder: Path) -> int:
    """The bytes of the files in `folder` (and below)."""
    total = 0
    for parent, _, names in os.walk(folder):
        for name in names:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(parent, name)).st_size
    return total


def _delete(folder: Path) -> None:
    shutil.rmtree(folder, ignore_errors=True)
    if folder.exists():
        log.warning("warning: cannot delete %s: remove it by hand", folder)
