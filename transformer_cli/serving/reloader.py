"""Hot reload: keep the served model in step with the file(s) it came from.

The files' identities (inode, size, mtime) are polled every `poll_s` seconds: one file, or
each member of an ensemble. When one changes (`tfm train` promotes by an atomic rename, so the
inode changes), the model is loaded again from all of them and verified (sha256,
weights_only) on a thread of its own while the old model keeps serving; then `current` is
replaced, which the batcher reads between batches: a promotion of one member replaces that
member. A damaged or unloadable file is logged and counted, and the old model stays. A file
that disappears is logged once (and once when it is back); the loaded model keeps serving
meanwhile and /health shows the file missing.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable
from concurrent.futures import Executor
from pathlib import Path

from ..api import Translator
from ..errors import first_line
from .metrics import Metrics

log = logging.getLogger("tfm")
FileIdentity = tuple[int, int, int]


def file_identities(paths: list[Path]) -> tuple[FileIdentity | None, ...]:
    return tuple(file_identity(p) for p in paths)


def file_identity(path: Path) -> FileIdentity | None:
    """(inode, size, mtime in ns) of `path`, or None while it does not exist."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns


class ModelWatcher:
    def __init__(
        self,
        model: Translator,
        open_translator: Callable[[list[Path]], Translator],
        poll_s: float,
        executor: Executor,
        metrics: Metrics,
    ):
        self.current = model
        self.paths = model.paths
        self._open, self._poll_s, self._executor, self._metrics = open_translator, poll_s, executor, metrics
        self._seen = file_identities(self.paths)
        self.file_missing = False  # set while the file is gone (the model loaded from it serves)
        self._published(model)

    def _published(self, model: Translator) -> None:
        self._metrics.model.info({k: str(v) for k, v in model.info().items()})

    async def run(self) -> None:
        """Poll forever (cancelled when the server stops)."""
        while True:
            await asyncio.sleep(self._poll_s)
            seen = file_identities(self.paths)
            missing = [p for p, identity in zip(self.paths, seen) if identity is None]
            if bool(missing) != self.file_missing:  # one went, or all came back
                self.file_missing = bool(missing)
                if self.file_missing:
                    log.warning(
                        "warning: %s is gone: still serving the model loaded from it (%s); "
                        "a new file there will be loaded",
                        ", ".join(map(str, missing)),
                        self.current.sha256[:12],
                    )
                else:
                    log.info("%s is back", ", ".join(map(str, self.paths)))
            if not missing and seen != self._seen:
                self._seen = seen
                await self.reload()

    async def reload(self) -> None:
        """Load the file again in the background and swap it in if it is a good model."""
        started = time.monotonic()
        loop = asyncio.get_running_loop()
        try:
            model = await loop.run_in_executor(self._executor, self._open, self.paths)
        except Exception as e:  # whatever is wrong with the file, the server keeps serving
            self._metrics.reloads.labels("failed").inc()
            log.warning(
                "hot reload of %s failed, still serving %s: %s",
                ", ".join(map(str, self.paths)),
                self.current.sha256[:12],
                first_line(e),
            )
            return
        seconds = time.monotonic() - started
        if model.sha256 == self.current.sha256:
            log.info(
                "%s changed on disk but holds the model being served (%s)",
                ", ".join(map(str, self.paths)),
                model.sha256[:12],
            )
            return
        old, self.current = self.current, model
        self._metrics.reloads.labels("ok").inc()
        self._metrics.reload_seconds.set(seconds)
        self._published(model)
        log.info(
            "hot reload: now serving %s (was %s), loaded and verified in %.2f s",
            model.sha256[:12],
            old.sha256[:12],
            seconds,
        )
