"""Crash-safe file writes: write a temp file beside the target, fsync, rename, fsync the dir.

A reader (or a process started after a crash) sees the old file or the new one, never a
partial one. Failures (disk full, read-only directory) leave the old file untouched and
raise `TfmError` with one line naming the path.
"""

from __future__ import annotations

import contextlib
import fcntl
import glob
import hashlib
import io
import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import IO, Any, cast

from .errors import TfmError

# The descriptors of the flock()s this process holds (run and data-folder locks). A flock
# belongs to the open file, which a forked child (a DataLoader or preprocessing worker)
# shares: the child closes its copies at once, or a worker outliving a SIGKILLed parent
# would keep the lock.
_LOCK_FDS: set[int] = set()


def _close_inherited_locks() -> None:
    for fd in _LOCK_FDS:
        try:
            os.close(fd)
        except OSError:
            pass
    _LOCK_FDS.clear()


os.register_at_fork(after_in_child=_close_inherited_locks)


def track_lock(fd: int) -> None:
    """`fd` holds (or will hold) a flock: forked children close their copy of it."""
    _LOCK_FDS.add(fd)


def close_lock(fd: int) -> None:
    """Close a `track_lock` descriptor, which releases its flock."""
    _LOCK_FDS.discard(fd)
    os.close(fd)


POLL_S = 0.1  # how often a wait for an `exclusive_lock` tries again (and checks for a stop)


@contextlib.contextmanager
def exclusive_lock(
    path: Path, check_stop: Callable[[], None] | None = None, on_wait: Callable[[], None] | None = None
) -> Iterator[None]:
    """Hold an exclusive flock on `path` (created if missing) for the block. While another
    process holds it, wait: `on_wait` is called once (to say so), `check_stop` between tries
    (it may raise). The kernel drops the lock when the process dies; forked children close
    their copy (`track_lock`)."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as e:
        raise TfmError(f"cannot open the lock file {path}: {e.strerror}") from None
    track_lock(fd)
    try:
        waited = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if not waited and on_wait is not None:
                    on_wait()
                waited = True
                if check_stop is not None:
                    check_stop()
                time.sleep(POLL_S)
        yield
    finally:
        close_lock(fd)


class WriteError(TfmError):
    """A write that failed (disk full, read-only folder): `cannot write <path>: <reason>`."""

    def __init__(self, path: Path, reason: str):
        super().__init__(f"cannot write {path}: {reason}")
        self.path, self.reason = path, reason


def _current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK = _current_umask()


def fsync_dir(path: Path) -> None:
    """Persist a rename inside `path` (no-op where directories cannot be opened)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def remove_stale_temp_files(folder: Path) -> int:
    """Delete the temp files that `atomic_write` left in `folder` when its process died mid-write
    (SIGKILL, power loss). Only call this while no other process can be writing there, e.g.
    under the run's lock. Returns how many were removed."""
    removed = 0
    for tmp in Path(folder).glob(".*.tmp"):  # the names atomic_write gives its temp files
        try:
            tmp.unlink()
            removed += 1
        except OSError:
            pass
    return removed


def atomic_write(path: Path, write: Callable[[io.BufferedWriter], object], keep_previous: Path | None = None) -> None:
    """Create or replace `path` atomically; `write` receives the open temp file.

    With `keep_previous`, an existing `path` becomes `keep_previous` once the new content is
    safely on disk, just before the new file takes its place; `path` never goes missing.
    """
    path = Path(path)
    tmp_name = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        os.fchmod(fd, 0o666 & ~_UMASK)  # mkstemp makes 0600 files; keep the usual permissions
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        if keep_previous is not None and path.exists():
            _keep_as(path, Path(keep_previous))
        os.replace(tmp_name, path)
        tmp_name = None
        fsync_dir(path.parent)
    except OSError as e:
        raise WriteError(path, str(e.strerror or e)) from None
    finally:
        if tmp_name is not None:
            try:
                os.unlink(tmp_name)
            except OSError:
                pass


def _keep_as(path: Path, previous: Path) -> None:
    """Make `previous` hold what `path` holds with no moment at which `path` is missing: hard-link
    it to a temp name and rename that over `previous`. (Renaming `path` itself would leave no
    `path` to a crash before the new file is renamed in.) Without hard links, rename `path`."""
    link = previous.parent / f".{previous.name}.{os.getpid()}.tmp"
    try:
        link.unlink(missing_ok=True)
        os.link(path, link)
    except OSError:
        os.replace(path, previous)
        return
    os.replace(link, previous)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    atomic_write(path, lambda f: f.write(data))


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: Path, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=False, ensure_ascii=False) + "\n")


class _WriteRecorder:
    """File wrapper that remembers the OSError of a failed write: torch's zip writer replaces it
    with a RuntimeError ("unexpected pos ..."), which would hide a full disk."""

    def __init__(self, f: io.BufferedWriter):
        self.f = f
        self.error: OSError | None = None

    def write(self, data: Any) -> int:
        try:
            return self.f.write(data)
        except OSError as e:
            self.error = e
            raise

    def flush(self) -> None:
        self.f.flush()


def atomic_torch_save(path: Path, obj: Any, keep_previous: Path | None = None) -> None:
    import torch

    def write(f: io.BufferedWriter) -> None:
        sink = _WriteRecorder(f)
        try:
            torch.save(obj, cast(IO[bytes], sink))  # torch only writes and flushes
        except RuntimeError:
            if sink.error is not None:
                raise sink.error from None  # atomic_write turns it into "cannot write <path>"
            raise

    atomic_write(path, write, keep_previous)


def atomic_write_folder(final: Path, build: Callable[[Path], None]) -> None:
    """Create or replace the folder `final` as a whole: `build` fills the work folder
    `.NAME.tmp-PID` beside it, its files are fsynced, and it is renamed into place; a previous
    `final` is moved aside to `.NAME.old-PID` first and deleted after the swap. On any failure
    or interruption (an exception, a stop signal raised as one) the work folder goes and `final`
    is as before; an OSError becomes a WriteError naming `final`. Work folders that a killed
    process left are cleaned up first (`remove_stale_work_folders`).
    """
    final = Path(final)
    tmp, old = (final.with_name(f".{final.name}.{kind}-{os.getpid()}") for kind in ("tmp", "old"))
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_work_folders(final)
        tmp.mkdir()  # mode 0777 less the umask: the usual permissions
        build(tmp)
        for path in tmp.rglob("*"):
            if path.is_file():
                with open(path, "rb") as f:
                    os.fsync(f.fileno())
        if final.exists():
            os.replace(final, old)
        os.replace(tmp, final)
    except BaseException as e:
        shutil.rmtree(tmp, ignore_errors=True)
        if old.exists() and not final.exists():
            os.replace(old, final)
        if isinstance(e, OSError):
            raise WriteError(final, _reason(e, final)) from None
        raise
    fsync_dir(final.parent)
    shutil.rmtree(old, ignore_errors=True)


def _reason(error: OSError, path: Path) -> str:
    """The error's reason, naming the folder above `path` it concerns, if any: "File exists:
    a/file" says more than "File exists" when a parent of a/file/out is a file."""
    reason = str(error.strerror or error)
    above = error.filename is not None and Path(error.filename) in path.parents
    return f"{reason}: {error.filename}" if above else reason


def remove_stale_work_folders(final: Path) -> int:
    """Clean up the `.NAME.tmp-PID` / `.NAME.old-PID` folders that `atomic_write_folder` left
    beside `final` when its process died (SIGKILL, power loss): a work folder is deleted; an
    old folder is deleted, or renamed back to `final` if the process died between the two
    renames (`final` missing). Folders of live processes are left alone. Returns how many went."""
    final = Path(final)
    return _remove_dead(final.parent, f".{glob.escape(final.name)}.*-*", re.escape(final.name))


def remove_dead_work_folders(folder: Path) -> int:
    """`remove_stale_work_folders` for every name: the work folders of dead processes in
    `folder`, whatever they were writing (an export cleans up beside it, not only its own
    name's). Returns how many went."""
    return _remove_dead(Path(folder), ".*.*-*", r".+")


def _remove_dead(folder: Path, pattern: str, name: str) -> int:
    """The `.NAME.tmp-PID` / `.NAME.old-PID` folders in `folder` (glob `pattern`, NAME
    matching the regex `name`) whose PID is dead, removed (an old one put back in place of a
    missing NAME)."""
    regex = re.compile(rf"\.({name})\.(tmp|old)-(\d+)")
    removed = 0
    for path in folder.glob(pattern):
        match = regex.fullmatch(path.name)
        if match is None or not path.is_dir() or _process_alive(int(match.group(3))):
            continue
        final = folder / match.group(1)
        if match.group(2) == "old" and not final.exists():
            os.replace(path, final)
        else:
            shutil.rmtree(path, ignore_errors=True)
            removed += not path.exists()
    return removed


def _process_alive(pid: int) -> bool:
    """Whether another process with this id is running (this process's own id: no, so that its
    leftovers from an earlier, failed attempt count as stale)."""
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # alive, owned by someone else
    return True


def file_sha256(path: Path) -> str:
    """SHA-256 of a file's bytes (an OSError if it cannot be read)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def file_record(path: Path, sha256: str) -> dict[str, Any]:
    """What is recorded of a file whose sha256 was just computed: its size, its modification
    time and the sum, so that `recorded_sha256` can trust the sum later without re-reading it."""
    st = Path(path).stat()
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": sha256}


def recorded_sha256(path: Path, record: Mapping[str, Any] | None) -> str | None:
    """The sum in `record` (see `file_record`) if the file still has the size and modification
    time recorded with it, else None (then it has to be read). Writing a file, in place or by
    rename, changes its modification time; a change that restores it is found only by reading
    (`tfm preprocess --verify`)."""
    if not isinstance(record, Mapping) or "mtime_ns" not in record:
        return None
    try:
        st = Path(path).stat()
    except OSError:
        return None
    if (st.st_size, st.st_mtime_ns) != (record.get("size"), record.get("mtime_ns")):
        return None
    return str(record.get("sha256"))


def append_whole_lines(fd: int, data: bytes, sync: bool = True) -> None:
    """Append `data`, whole lines, to the file open at `fd` (O_RDWR | O_APPEND, under the caller's lock):
    a line a killed writer cut short goes first, every byte is written (a write stops short on
    a filling disk: go on until it fails) and, with `sync`, is on disk at return; an OSError
    leaves the file as it was before the call, but for that cut-short line."""
    size = _whole_lines_size(fd)
    os.ftruncate(fd, size)
    written = 0
    try:
        while written < len(data):
            written += os.write(fd, data[written:])
        if sync:
            os.fsync(fd)
    except OSError:
        os.ftruncate(fd, size)  # nothing half-written
        raise


def _whole_lines_size(fd: int) -> int:
    """The size of the open file up to its last newline."""
    pos = os.fstat(fd).st_size
    while pos > 0:
        step = min(4096, pos)
        cut = os.pread(fd, step, pos - step).rfind(b"\n")
        if cut >= 0:
            return pos - step + cut + 1
        pos -= step
    return 0
