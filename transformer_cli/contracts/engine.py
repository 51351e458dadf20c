"""What runs an export format's folders: one `Engine` per name in seams.ENGINES (the name an
export's manifest gives; `torch` for a path without one)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Engine:
    """`open`: (path, device, precision, decode settings or None, threads) -> an
    inference.translate.TranslationBackend, api.open_backend's arguments. `read_checkpoint`:
    (folder) -> a tfm Checkpoint, for an engine whose exports keep trainable weights
    (model_io.read_model asks it: train.init_from, exports, translation with torch); None: its
    exports are refused there, by the engine's name (CTranslate2's: converted weights)."""

    open: Callable[[Path, str, str, Any, Any], Any]
    read_checkpoint: Callable[[Path], Any] | None = None
