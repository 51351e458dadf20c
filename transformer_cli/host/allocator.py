"""Which malloc a long-running tfm process uses, and handing freed memory back.

bf16 training on a CPU allocates tensors whose sizes change with every batch shape, and
glibc's malloc fragments under that: base.yaml's resident memory grows from 1.9 to 3.4 GB
in its first 200 steps and keeps growing, while mimalloc, tcmalloc and jemalloc hold it flat
at 1.2-1.5 GB and train faster (docs/results.md, "Flat training memory"). An allocator replaces malloc only
when it is loaded before everything else, so `tfm train` and `tfm serve` re-execute
themselves once, first thing (same PID, same arguments, nothing imported or locked yet),
with `LD_PRELOAD` naming the first library found:

1. `TFM_ALLOCATOR`: a shared library's path, or `system` for the C library's malloc;
2. mimalloc, a dependency on Linux (the `cmeel-mimalloc` wheel);
3. Debian's tcmalloc (`libtcmalloc-minimal4`), then jemalloc (`libjemalloc2`).

Processes a preloaded tfm starts (DataLoader and preprocessing workers, forked) inherit it.
Where none is found, glibc's malloc stays, and the loops hand its freed memory back at their
quiet points (`release_freed_memory`). Nothing here imports torch.
"""

from __future__ import annotations

import ctypes
import functools
import importlib.metadata
import os
import sys
from pathlib import Path

from ..errors import UsageError

ENV = "TFM_ALLOCATOR"
SYSTEM = "system"
# Set in the re-executed process: it never re-executes again, whatever its preload became.
PRELOADED_ENV = "TFM_ALLOCATOR_PRELOADED"
# (name, wheel, the library inside the wheel) and (name, Debian file name), in preference order.
WHEEL_LIBRARIES = (("mimalloc", "cmeel-mimalloc", "cmeel.prefix/lib/libmimalloc.so.3"),)
SYSTEM_LIBRARIES = (("tcmalloc", "libtcmalloc_minimal.so.4"), ("jemalloc", "libjemalloc.so.2"))
KNOWN = ("mimalloc", "tcmalloc", "jemalloc")


def _from_wheel(wheel: str, member: str) -> Path | None:
    try:
        path = Path(str(importlib.metadata.distribution(wheel).locate_file(member)))
    except importlib.metadata.PackageNotFoundError:
        return None
    return path if path.is_file() else None


def found() -> Path | None:
    """The allocator library tfm would preload here, or None for the system's malloc.

    Raises UsageError when `TFM_ALLOCATOR` names a file that does not exist."""
    setting = os.environ.get(ENV, "").strip()
    if setting == SYSTEM:
        return None
    if setting:
        path = Path(setting).expanduser()
        if not path.is_file():
            raise UsageError(
                f"{ENV}={setting}: no such file (give a shared library's path, "
                f"or '{SYSTEM}' for the C library's malloc)"
            )
        return path.resolve()
    for _, wheel, member in WHEEL_LIBRARIES:
        if (library := _from_wheel(wheel, member)) is not None:
            return library
    libdir = Path("/usr/lib") / f"{os.uname().machine}-linux-gnu"
    for _, filename in SYSTEM_LIBRARIES:
        if (libdir / filename).is_file():
            return libdir / filename
    return None


@functools.cache
def in_use() -> str:
    """The allocator this process runs on: a known library mapped into it, else "glibc"
    (Linux) or "system"."""
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return SYSTEM
    for name in KNOWN:
        if f"lib{name}" in maps or f"lib{name}_minimal" in maps:
            return name
    preloaded = os.environ.get(PRELOADED_ENV)
    if preloaded and preloaded in maps:
        return Path(preloaded).name
    return "glibc"


def describe() -> str:
    """`in_use()` for a start-up log line; on glibc, how to get a flat-memory allocator."""
    name = in_use()
    if name != "glibc":
        return f"{name} malloc"
    return (
        "glibc malloc: memory may grow in bf16; `pip install cmeel-mimalloc` (mimalloc) keeps it "
        "flat, or TFM_ALLOCATOR names a library"
    )


def _command_line() -> list[str]:
    """The command line that started this process; where another program imported tfm and
    runs its `main()` with an `sys.argv` of its own (a forked test harness, say), the
    equivalent `python -m transformer_cli ARGS`, so the restart runs tfm, not that program."""
    args, original = sys.argv[1:], sys.orig_argv
    if len(original) > len(args) and original[len(original) - len(args) :] == args:
        return [sys.executable, *original[1:]]
    return [sys.executable, "-m", "transformer_cli", *args]


def restart_with_preferred() -> None:
    """Re-execute this process with `found()` preloaded, unless it is loaded already, this
    process is itself such a restart, or the platform is not Linux. Returns only when no
    restart happens."""
    if not sys.platform.startswith("linux") or os.environ.get(PRELOADED_ENV) is not None:
        return
    library = found()
    if library is None:
        return
    preload = os.environ.get("LD_PRELOAD", "")
    if str(library) in preload.split(":") or str(library) in preload.split():
        return
    env = {**os.environ, "LD_PRELOAD": ":".join(filter(None, [str(library), preload])), PRELOADED_ENV: str(library)}
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execve(sys.executable, _command_line(), env)
    except OSError:  # no executable to restart (embedded Python): go on with the system's
        return


def release_freed_memory() -> None:
    """Hand memory that glibc's malloc keeps after frees back to the OS (`malloc_trim`), at
    points where it costs nothing measurable (before forking workers, after a validation, when
    a server goes idle); a no-op under other allocators and platforms."""
    if in_use() != "glibc":
        return
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):
        pass
