"""The process that computes near-matches' keys ahead (inference/near_keys.py) for a server of a
corrections store:

    python -m transformer_cli.serving.near_keys_worker STORE MODEL

`tfm serve` starts it (serving/corrections.py, at the first line with near-matches) and it
runs at the lowest CPU priority with one thread, so the server's own decoding goes first. It
follows the store's accepted corrections, the newest first, leaving out those the model's run
trained on (a server leaves them to the model), in batches of BATCH; and the model file: when a
new model is promoted there it starts on that model's folder. It ends when its server does (its
stdin, a pipe from the server, closes). One writer a folder (`.writer.lock`): a second server's
worker for the same model waits until the first ends. Of a store's folders, the KEEP written to
last are kept; the others (models no longer served) are removed, renamed first so that a
reader never takes a half-removed folder for keys.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import torch

from ..corrections.store import CorrectionStore
from ..corrections.training import trained_until
from ..fsutil import exclusive_lock
from ..inference.near_keys import FOLDER, KeysWriter, keys_folder, pair_key
from .reloader import FileIdentity, file_identity

BATCH = 32  # corrections read by the model at a time
KEEP = 2  # models' folders a store keeps (the one served, and the one before it)
IDLE_S = 1.0  # the wait for new corrections when all have their keys


def main(argv: list[str] | None = None) -> None:
    store_dir, model_path = (Path(a) for a in (argv or sys.argv[1:])[:2])
    with contextlib.suppress(OSError):
        os.nice(19)
    torch.set_num_threads(1)
    threading.Thread(target=_end_with_the_server, daemon=True).start()
    store = CorrectionStore(store_dir)
    while True:
        identity = file_identity(model_path)
        if identity is None:
            time.sleep(IDLE_S)
            continue
        follow(store, model_path, functools.partial(_unchanged, model_path, identity))


def follow(store: CorrectionStore, model_path: Path, current: Callable[[], bool]) -> None:
    """Compute the keys of `store`'s corrections for the model at `model_path` while `current()`
    says it is the one there (a callable: the file unchanged)."""
    from ..api import load

    backend = load(model_path, device="cpu", threads=1).backend
    if not backend.reads_examples:
        while current():
            time.sleep(IDLE_S)  # nothing to compute for it: wait for the next model
        return
    folder = keys_folder(store.folder, backend.metadata.sha256)
    folder.mkdir(parents=True, exist_ok=True)
    with exclusive_lock(folder / ".writer.lock"):
        prune(store.folder, folder)
        until = trained_until(backend.metadata.training, store.folder)
        writer = KeysWriter(folder, backend.metadata.sha256)
        todo: list[tuple[str, str]] = []  # the pairs still without keys, as of `read`
        read: tuple[object, int] | None = None  # the fold and its changes `todo` was made from
        while current():
            store.refresh()
            if read != (store.fold, len(store.fold.changed)):
                read = (store.fold, len(store.fold.changed))
                todo = _without_keys(store, until, writer)
            batch, todo = todo[:BATCH], todo[BATCH:]
            if batch:
                writer.append(batch, backend.example_keys(batch))
            else:
                time.sleep(IDLE_S)


def _without_keys(store: CorrectionStore, until: float | None, writer: KeysWriter) -> list[tuple[str, str]]:
    """The store's corrections in force accepted after `until` whose keys the folder lacks,
    the newest first."""
    return [
        (c.source, c.corrected)
        for c in reversed(list(store.fold.current().values()))
        if (until is None or c.time > until) and pair_key(c.source, c.corrected) not in writer.known
    ]


def prune(store: Path, serving: Path) -> None:
    """Remove the store's keys folders but `serving` and the others of the KEEP last written to
    (a folder another worker is writing: kept)."""
    folders = [f for f in (store / FOLDER).iterdir() if f.is_dir() and not f.name.startswith(".")]
    by_age = sorted(folders, key=_last_written, reverse=True)
    kept = {serving, *[f for f in by_age if f != serving][: KEEP - 1]}
    for folder in by_age:
        if folder in kept:
            continue
        with contextlib.suppress(OSError), exclusive_lock(folder / ".writer.lock", on_wait=_busy):
            gone = folder.with_name(f".pruned-{folder.name}")
            folder.rename(gone)
            shutil.rmtree(gone, ignore_errors=True)
    for leftover in (store / FOLDER).glob(".pruned-*"):  # a removal a crash cut short
        shutil.rmtree(leftover, ignore_errors=True)


class _Busy(OSError):
    """Another worker holds a folder's lock: it is kept."""


def _busy() -> None:
    raise _Busy()


def _unchanged(path: Path, identity: FileIdentity) -> bool:
    return file_identity(path) == identity


def _last_written(folder: Path) -> float:
    try:
        return (folder / "index.bin").stat().st_mtime
    except OSError:
        return folder.stat().st_mtime


def _end_with_the_server() -> None:
    """Exit once stdin (the server's pipe) closes: the server ended, however it did."""
    while sys.stdin.buffer.read(4096):
        pass
    os._exit(0)


class KeysAhead:
    """A server's worker (see the module docstring), started at the first call of `start`."""

    def __init__(self, store: Path, model_path: Path):
        self.store, self.model_path = store, model_path
        self._process: subprocess.Popen[bytes] | None = None
        self._starting = threading.Lock()

    def start(self) -> None:
        with self._starting:
            if self._process is None:
                command = [sys.executable, "-m", __spec__.name, str(self.store), str(self.model_path)]
                self._process = subprocess.Popen(command, stdin=subprocess.PIPE, start_new_session=True)

    def close(self) -> None:
        """End the worker (it ends by itself too, when this process does)."""
        with self._starting:
            if self._process is not None and self._process.stdin is not None:
                self._process.stdin.close()
                self._process.wait()


if __name__ == "__main__":
    main()
