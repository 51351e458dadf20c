"""A training run's directory: its files, its lock, its log.

checkpoints/<name>/
  .lock            flock()ed while a `tfm train` works here (the kernel drops it on death)
  config.yaml      the resolved config
  manifest.json    data checksums, versions, git commit, seed, device
  train.log        timestamped log of every session
  metrics.jsonl    one JSON object per validation (epoch ends flagged)
  last.pt          resumable state (+ last.prev.pt, the one before it)
  best.pt          weights with the lowest validation loss so far
  published.pt     the model `tfm translate` serves; replaced only through the promotion gate
  published.history/  the models promotions replaced (newest train.keep_published kept)
  promotions.log   one JSON line per promotion decision
  retrain.json     train.retrain's decision for the run (kept for its resumes: training/retrain_policy.py)
  vocabulary.json  the pieces the run added to its parent's vocabulary (training/vocabulary_growth.py)
  scratch.json     (checkpoints/<name>.scratch/ only) the run from scratch behind the nights (training/scratch_run.py)
  curves.png       loss / perplexity curves
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import logging
import os
import sys
from dataclasses import fields
from pathlib import Path
from typing import Any

from ..config import Config
from ..config_train import TrainConfig
from ..config_values import as_before
from ..errors import BusyError, TfmError
from ..fsutil import atomic_write_text, close_lock, remove_stale_temp_files, track_lock
from .metrics import ValidationRecord, read_jsonl, write_jsonl

log = logging.getLogger("tfm")

# Set by `tfm train --nproc-per-node` (training/launch.py) for the processes it starts: the pid
# of their parent, which holds the run's lock for them.
LOCK_HOLDER_ENV = "TFM_RUN_LOCK_HOLDER"
# Settings that may change between sessions of one run without starting it over (schema metadata).
RESUMABLE_CHANGES = {f.name for f in fields(TrainConfig) if f.metadata.get("resumable")}
# The parent's settings, which join the identity as its lineage (below), only when one is set.
LINEAGE_KEYS = {"init_from", "continued"}


def run_identity(cfg: Config, data_fingerprint: str, lineage: dict[str, Any] | None = None) -> str:
    """What makes two sessions the same run: the data, tokenizer, model and optimization, as
    configured. A last.pt of another identity is not resumed: the run starts over.

    A run with train.init_from adds its `lineage` (training/parent.py: the parent as named, the
    tokenizers' digest and train.continued); a run without has the identity it had before
    train.init_from existed, so runs of earlier versions still resume."""
    train = {k: v for k, v in as_before(cfg.train).items() if k not in RESUMABLE_CHANGES | LINEAGE_KEYS}
    payload = {
        "data": data_fingerprint,
        "tokenizer": as_before(cfg.tokenizer),
        "model": as_before(cfg.model),
        "train": train,
    }
    if lineage is not None:
        payload["lineage"] = lineage
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


class _RunLogHandler(logging.FileHandler):
    """train.log: a write that fails (disk full) warns once on stderr and stops file logging,
    instead of printing logging's traceback for every record and masking the real error."""

    def __init__(self, path: Path):
        super().__init__(path, encoding="utf-8")
        self.failed = False

    def _fail(self, error: BaseException | None) -> None:
        if not self.failed:
            reason = getattr(error, "strerror", None) or error
            print(
                f"tfm: warning: cannot write {self.baseFilename}: {reason} (logging to it stops for this session)",
                file=sys.stderr,
            )
        self.failed = True
        stream, self.stream = self.stream, None
        if stream is not None:
            try:
                stream.close()
            except OSError:
                pass  # its buffered lines are lost with the disk space

    def handleError(self, record: logging.LogRecord) -> None:
        self._fail(sys.exc_info()[1])

    def emit(self, record: logging.LogRecord) -> None:
        if not self.failed:
            super().emit(record)

    def close(self) -> None:
        try:
            super().close()
        except OSError as e:
            self._fail(e)


class RunDir:
    def __init__(self, path: Path):
        self.path = Path(path)
        self.lock_file = self.path / ".lock"
        self.config = self.path / "config.yaml"
        self.manifest = self.path / "manifest.json"
        self.log = self.path / "train.log"
        self.metrics = self.path / "metrics.jsonl"
        self.last = self.path / "last.pt"
        self.last_prev = self.path / "last.prev.pt"
        self.best = self.path / "best.pt"
        self.published = self.path / "published.pt"
        self.published_history = self.path / "published.history"
        self.promotions = self.path / "promotions.log"
        self.retrain = self.path / "retrain.json"
        self.vocabulary = self.path / "vocabulary.json"
        self.curves = self.path / "curves.png"
        self.snapshots = self.path / "snapshots"
        self._lock_fd: int | None = None
        self._held_by_parent = False

    def create(self) -> None:
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise TfmError(f"cannot create run directory {self.path}: {e.strerror}") from None

    # ------------------------------------------------------------------ lock
    @property
    def locked(self) -> bool:
        return self._lock_fd is not None or self._held_by_parent

    def lock(self) -> None:
        """Take the run's exclusive lock or raise BusyError naming the holder's PID (a process
        that `tfm train --nproc-per-node` started has it from its parent)."""
        self.create()
        if os.environ.get(LOCK_HOLDER_ENV) == str(os.getppid()):
            self._held_by_parent = True
            return
        try:
            fd = os.open(self.lock_file, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise TfmError(
                f"cannot open the lock file {self.lock_file}: {e.strerror} (tfm train "
                "needs a writable run directory; see train.out_dir)"
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise BusyError(f"run {self.path} is busy: another tfm train holds its lock (pid {holder})") from None
            raise TfmError(f"cannot lock {self.lock_file}: {e.strerror}") from None
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except OSError as e:
            os.close(fd)
            raise TfmError(f"cannot write {self.lock_file}: {e.strerror}") from None
        self._lock_fd = fd
        track_lock(fd)
        # A session killed mid-write leaves its temp file; only the lock holder may clear them.
        removed = sum(remove_stale_temp_files(d) for d in (self.path, self.snapshots) if d.is_dir())
        if removed:
            log.info("removed %d temp file(s) left by an interrupted session in %s", removed, self.path)

    def unlock(self) -> None:
        if self._lock_fd is not None:
            close_lock(self._lock_fd)
            self._lock_fd = None

    # ------------------------------------------------------------------ log and metrics
    def attach_log(self, logger: logging.Logger) -> logging.Handler:
        """Mirror `logger` into train.log (timestamped, always at INFO)."""
        try:
            handler = _RunLogHandler(self.log)
        except OSError as e:
            raise TfmError(f"cannot write {self.log}: {e.strerror}") from None
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s", "%Y-%m-%d %H:%M:%S"))
        handler.setLevel(logging.INFO)
        if logger.getEffectiveLevel() > logging.INFO:  # library use: still log INFO to the file
            logger.setLevel(logging.INFO)
        logger.addHandler(handler)
        return handler

    def write_metrics(self, history: list[ValidationRecord]) -> None:
        """Rewrite metrics.jsonl from the history kept in the checkpoint (atomically)."""
        atomic_write_text(self.metrics, write_jsonl(history))

    def read_metrics(self) -> list[ValidationRecord]:
        if not self.metrics.is_file():
            return []
        return read_jsonl(self.metrics.read_text())
