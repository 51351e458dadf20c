"""The manifest of a tfm export (`tfm-export.json`), typed: which engine runs the folder, the
checkpoint it was made from (content sha256, architecture, run config, metrics), and the
sha256 of every other file. A CTranslate2 export (export/bundle.py), a Hugging Face one
(hf/export.py) and a plugin's format share it; each adds its own fields (`details`), written
beside the common ones.

`ExportManifest.read` is the one reader: it checks every field's type and every listed file's
sha256, so a folder that loads is the folder that was exported.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .checkpoint import Checkpoint, CheckpointError, ModelDescription
from .fsutil import file_sha256
from .records import from_json, to_json
from .version import __version__

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
    # The format's own fields, beside the others in the file: CTranslate2's engine_version,
    # quantization (as asked), weights (the type it stores), checkpoint_file_sha256; Hugging
    # Face's features ("interleaved": permuted for Marian's halves), tokenizer (the file of
    # tfm's own), pad_moved_last (per side, the <pad> id moved to the end); a plugin's own.
    details: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def new(cls, engine: str, source: Path, checkpoint: Checkpoint, folder: Path, **details: Any) -> ExportManifest:
        """The manifest of an export of `checkpoint` (read from `source`) just written to
        `folder`: the sums of every file there, and the format's own `details`."""
        clash = set(details) & {f.name for f in dataclasses.fields(cls)}
        if clash:
            raise ValueError(f"an export's own fields cannot be named {', '.join(sorted(clash))}")
        return cls(
            format=FORMAT,
            engine=engine,
            tfm_version=__version__,
            created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
            checkpoint=str(source),
            checkpoint_sha256=checkpoint.digest,
            model=checkpoint.model_description(),
            config=checkpoint.config,
            metrics=checkpoint.metrics,
            files={p.name: file_sha256(p) for p in sorted(folder.iterdir())},
            details={k: v for k, v in details.items() if v is not None},
        )

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
        common = {f.name for f in dataclasses.fields(cls)} - {"details"}
        try:
            manifest = from_json(cls, {k: v for k, v in raw.items() if k in common}, MANIFEST)
        except ValueError as e:
            raise CheckpointError(f"export {folder}: its manifest does not fit this tfm: {e}") from None
        for name, digest in manifest.files.items():
            path = folder / name
            if not path.is_file():
                raise CheckpointError(f"export {folder} is incomplete: {name} is missing")
            if file_sha256(path) != digest:
                raise CheckpointError(f"export {folder} is damaged: {name} does not match its sha256 in {MANIFEST}")
        return dataclasses.replace(manifest, details={k: v for k, v in raw.items() if k not in common})

    def write(self, folder: Path) -> None:
        record = to_json(self)
        record.update(record.pop("details"))  # the format's own fields, beside the common ones
        (folder / MANIFEST).write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def is_export(path: Path) -> bool:
    """Whether `path` is a folder holding a tfm export, CTranslate2's or Hugging Face's (by its
    manifest, not its name)."""
    return (Path(path) / MANIFEST).is_file()


def export_engine(path: Path) -> str | None:
    """What runs a tfm export folder, the seams.ENGINES entry its manifest names: "ctranslate2",
    "transformers" (hf/export.py) or a plugin's; None when `path` is no export."""
    return stated_engine(path) if is_export(path) else None


def stated_engine(folder: Path) -> str:
    """The engine a manifest names, read without checks ("ctranslate2" when it cannot say:
    ExportManifest.read then reports the damage)."""
    try:
        raw = json.loads((Path(folder) / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return "ctranslate2"
    engine = raw.get("engine", "ctranslate2") if isinstance(raw, dict) else "ctranslate2"
    return engine if isinstance(engine, str) else "ctranslate2"
