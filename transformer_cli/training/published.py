"""published.pt and what surrounds it: its verification, the models it replaced
(`published.history/`), and promotions.log, one JSON line per decision of the gate
(training/promotion.py), which reads and writes them through this module."""

from __future__ import annotations

import json
import logging
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..checkpoint import Checkpoint, CheckpointError
from ..errors import UsageError
from ..fsutil import atomic_write_bytes, atomic_write_text
from .metrics import described
from .run_dir import RunDir

log = logging.getLogger("tfm")


def decisions(run: RunDir) -> list[dict[str, Any]]:
    """promotions.log's entries, oldest first (a damaged line is skipped: the others count)."""
    if not run.promotions.is_file():
        return []
    entries = []
    for line in run.promotions.read_text(errors="replace").splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict):
            entries.append(entry)
    return entries


def record(run: RunDir, entry: dict[str, Any]) -> None:
    """Append one decision to promotions.log (the file is replaced atomically)."""
    old = run.promotions.read_text(errors="replace") if run.promotions.is_file() else ""
    atomic_write_text(run.promotions, old + json.dumps(entry, allow_nan=False) + "\n")


def now() -> str:
    """A decision's time stamp: UTC, to the second."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def verified_published(run: RunDir) -> tuple[Checkpoint | None, bool]:
    """published.pt (None when absent or damaged) and whether it was damaged.
    A damaged file is moved aside to published.pt.damaged so that it is never served again."""
    if not run.published.is_file():
        return None, False
    try:
        return Checkpoint.read(run.published), False
    except (CheckpointError, UsageError) as e:
        aside = run.path / "published.pt.damaged"
        os.replace(run.published, aside)
        log.warning("%s: moved aside to %s; it will be replaced", e, aside)
        return None, True


def readable(path: Path) -> bool:
    """Whether `path` is a checkpoint that reads and verifies."""
    try:
        Checkpoint.read(path)
    except (CheckpointError, UsageError):
        return False
    return True


def archive(run: RunDir, published: Checkpoint, keep: int) -> None:
    """Keep the model being replaced in published.history/ (the newest `keep` are kept)."""
    folder = run.published_history
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    atomic_write_bytes(folder / f"{stamp}-{published.digest[:12]}.pt", run.published.read_bytes())
    for old in history(run)[keep:]:
        old.unlink(missing_ok=True)


def history(run: RunDir) -> list[Path]:
    """Models replaced by promotions, newest first."""
    if not run.published_history.is_dir():
        return []
    return sorted(run.published_history.glob("*.pt"), reverse=True)


def restore_from_history(run: RunDir) -> str | None:
    """Put the newest readable archived model back as published.pt; its file name, or None."""
    for path in history(run):
        try:
            Checkpoint.read(path)
        except (CheckpointError, UsageError) as e:
            log.warning("%s: skipped", e)
            continue
        atomic_write_bytes(run.published, path.read_bytes())
        path.unlink()
        return path.name
    return None


def describe_published(run: RunDir) -> str:
    """A few lines: published.pt and the archived models, each with its sha256 and metrics."""
    lines = []
    for label, path in [("published", run.published), *(("earlier", p) for p in history(run))]:
        try:
            checkpoint = Checkpoint.read(path)
        except (CheckpointError, UsageError) as e:
            lines.append(f"{label:<9} {path}: {e}")
            continue
        shown = described(checkpoint.metrics)
        lines.append(f"{label:<9} {path}  sha256 {checkpoint.digest[:12]}  {shown}")
    return "\n".join(lines)
