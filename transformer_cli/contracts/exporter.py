"""An export format: what `tfm export --format NAME` (export.format) writes, an entry of
seams.EXPORTERS. tfm's are CTranslate2's (export/bundle.py) and Hugging Face's (hf/export.py);
a plugin registers another, with its own settings (export.options) as the entry's `settings`.

Whatever the format, the folder holds a `tfm-export.json` (export_manifest.py) naming the
engine that runs it: `api.open_backend` opens it with that seams.ENGINES entry.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:  # importing the contract imports no torch (checkpoint.py's)
    from ..checkpoint import Checkpoint
    from ..export_manifest import ExportManifest


class Exporter(ABC):
    """One export format."""

    engine: ClassVar[str]  # the seams.ENGINES entry that runs its folders (their manifests name it)
    extra: ClassVar[str | None] = None  # an optional module it needs (extras.EXTRAS), imported first
    settings: ClassVar[type | None] = None  # the dataclass of its export.options (None: it has none)

    def refusals(self, checkpoint: Checkpoint) -> list[str]:
        """Every reason the model cannot be written in this format, each on its own (none: it
        can); `export` refuses such a model in one line listing them all."""
        return []

    @abstractmethod
    def export(self, model: Checkpoint, source: Path, output: Path, options: Any) -> tuple[ExportManifest, float]:
        """Write `model`, read from `source` (a checkpoint, or any model model_io.read_model
        reads: the caller reads it), to the folder `output`, replacing an earlier export there
        and nothing else, whole or not at all (fsutil.atomic_write_folder); `options`: its
        settings (None without). Returns the manifest written and the seconds it took."""

    def describe(self, manifest: ExportManifest) -> str:
        """What `tfm export` says it wrote, e.g. "ctranslate2, int8 weights"."""
        return manifest.engine
