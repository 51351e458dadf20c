"""The manifest of a tfm export (`tfm-export.json`), typed: which engine runs the folder, the
checkpoint it was made from (content sha256, architecture, run config, metrics), and the
sha256 of every other file. A CTranslate2 export (export/bundle.py) and a Hugging Face one
(hf/export.py) share it; each adds its own fields.

`ExportManifest.read` is the one reader: it checks every field's type and every listed file's
sha256, so a folder that loads is the folder that was exported.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .. import __version__
from ..checkpoint import Checkpoint, CheckpointError, ModelDescription
from ..fsutil import file_sha256
from ..records import from_json, to_json

MANIFEST = "tfm-export.json"
FORMAT = "tfm-export/1"


@dataclass(frozen=True, kw_only=True)
class ExportManifest:
    format: str
    engine: str = "ctranslate2"  # manifests written before the engine was named are CTranslate2's
    tfm_version: str
    created: str
    checkpoint: str  # the path it was exported from
    checkpoint_sha256: str  # Checkpoint.sha256: the content digest of the model
    model: ModelDescription
    config: dict[str, Any]  # the run config (its model, decode and data sections matter here)
    metrics: dict[str, Any]
    files: dict[str, str]  # every other file of the folder -> sha256
    # CTranslate2's
    engine_version: str | None = None
    quantization: str | None = None  # as asked (tfm export --quantization)
    weights: str | None = None  # the weight type CTranslate2 stores
    checkpoint_file_sha256: str | None = None
    # Hugging Face's
    features: str | None = None  # "interleaved": feature order permuted for Marian's halves
    tokenizer: str | None = None  # the file holding tfm's own tokenizers
    pad_moved_last: dict[str, int] | None = None  # per side: the <pad> id moved to the end

    @classmethod
    def new(cls, engine: str, source: Path, checkpoint: Checkpoint, folder: Path, **fields: Any
            ) -> ExportManifest:
        """The manifest of an export of `checkpoint` (read from `source`) just written to
        `folder`: the sums of every file there."""
        return cls(format=FORMAT, engine=engine, tfm_version=__version__,
                   created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
                   checkpoint=str(source), checkpoint_sha256=checkpoint.digest,
                   model=checkpoint.model_description(), config=checkpoint.config,
                   metrics=checkpoint.metrics,
                   files={p.name: file_sha256(p) for p in sorted(folder.iterdir())}, **fields)

    @classmethod
    def read(cls, folder: Path) -> ExportManifest:
        """The manifest of the export in `folder`, after checking every listed file's sha256;
        CheckpointError for a folder that is no export, or a damaged one."""
        folder = Path(folder)
        try:
            raw = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            raise CheckpointError(f"export {folder}: cannot read {MANIFEST}: {e}") from None
        if not isinstance(raw, dict) or raw.get("format") != FORMAT:
            raise CheckpointError(f"{folder} is not a tfm export (format {FORMAT} expected in {MANIFEST})")
        try:
            manifest = from_json(cls, raw, MANIFEST)
        except ValueError as e:
            raise CheckpointError(f"export {folder}: its manifest does not fit this tfm: {e}") from None
        for name, digest in manifest.files.items():
            path = folder / name
            if not path.is_file():
                raise CheckpointError(f"export {folder} is incomplete: {name} is missing")
            if file_sha256(path) != digest:
                raise CheckpointError(f"export {folder} is damaged: {name} does not match its sha256 "
                                      f"in {MANIFEST}")
        return manifest

    def write(self, folder: Path) -> None:
        (folder / MANIFEST).write_text(json.dumps(to_json(self), indent=2, ensure_ascii=False) + "\n",
                                       encoding="utf-8")


def stated_engine(folder: Path) -> str:
    """The engine a manifest names, read without checks ("ctranslate2" when it cannot say:
    ExportManifest.read then reports the damage)."""
    try:
        raw = json.loads((Path(folder) / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return "ctranslate2"
    engine = raw.get("engine", "ctranslate2") if isinstance(raw, dict) else "ctranslate2"
    return engine if isinstance(engine, str) else "ctranslate2"
