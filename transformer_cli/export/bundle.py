"""The export folder: a CTranslate2 model plus tfm's tokenizer and a manifest, self-contained.

    model.bin, config.json, *_vocabulary.json   the CTranslate2 model (ctranslate2.Translator loads it)
    tokenizer.json (+ spm.*.model)              tfm's tokenizer: SentencePiece models, or the spaCy
                                                vocabularies and detokenization rules
    tfm-export.json                             the manifest: format, engine and version,
                                                quantization, tfm version, the source checkpoint
                                                (path, content sha256, file sha256), its
                                                architecture, run config and metrics, and the
                                                sha256 of every other file (checked on load)

A folder is recognised as an export by its manifest, whatever it is called; `tfm export
--format hf` writes the same manifest (engine "transformers") beside a MarianMT model
(hf/export.py). It is written
into a temp folder and renamed into place, so a reader never sees half an export.
"""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .. import __version__
from ..checkpoint import CheckpointError
from ..data.tokenizers import TokenizerPair
from ..errors import UsageError
from ..fsutil import WriteError, atomic_write_folder, file_sha256
from .engine import import_ctranslate2, weight_type

MANIFEST = "tfm-export.json"
FORMAT = "tfm-export/1"


def is_export(path: Path) -> bool:
    """Whether `path` is a folder holding a tfm export, CTranslate2's or Hugging Face's (by its
    manifest, not its name)."""
    return (Path(path) / MANIFEST).is_file()


def export_engine(path: Path) -> str | None:
    """What runs a tfm export folder: "ctranslate2" (manifests before the engine was named say
    nothing else) or "transformers" (hf/export.py); None when `path` is no export."""
    if not is_export(path):
        return None
    try:
        manifest = json.loads((Path(path) / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return "ctranslate2"  # read_export reports the damage
    return str(manifest.get("engine", "ctranslate2")) if isinstance(manifest, dict) else "ctranslate2"


def export_checkpoint(checkpoint: Path, output: Path, quantization: str = "none") -> dict[str, Any]:
    """Write the CTranslate2 export of a tfm checkpoint to the folder `output` (replacing an
    earlier export there); returns the manifest, with "seconds" it took added. All the work
    happens inside the work folder of `atomic_write_folder`, so a stop or failure at any point
    leaves `output` as it was and no work folder behind."""
    from ..inference.translate import model_from_checkpoint
    from ..model_io import read_model
    from .ct2_spec import build_spec

    started = time.perf_counter()
    ct2 = import_ctranslate2()
    weights = weight_type(quantization)
    output = Path(output)
    check_output(output)
    manifest: dict[str, Any] = {}

    def build(folder: Path) -> None:
        read, _ = read_model(checkpoint)
        model, tokenizers = model_from_checkpoint(read, checkpoint)
        spec = build_spec(model, tokenizers)
        spec.optimize(quantization=weights)
        spec.save(str(folder))
        tokenizers.save(folder)
        manifest.update({
            "format": FORMAT, "engine": "ctranslate2", "engine_version": ct2.__version__,
            "quantization": quantization, "weights": weights, "tfm_version": __version__,
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "checkpoint": str(checkpoint), "checkpoint_sha256": read.sha256,
            "checkpoint_file_sha256": file_sha256(checkpoint),
            "model": read.model_description(), "config": read.config, "metrics": read.metrics,
            "files": {p.name: file_sha256(p) for p in sorted(folder.iterdir())}})
        (folder / MANIFEST).write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n",
                                       encoding="utf-8")

    atomic_write_folder(output, build)
    return {**manifest, "seconds": round(time.perf_counter() - started, 3)}


def check_output(output: Path) -> None:
    """Refuse an `--output` that holds something other than an earlier export (exit 2), or
    that cannot be looked into (a WriteError naming it, exit 1)."""
    try:
        taken = output.exists() and not is_export(output) and not (output.is_dir()
                                                                    and not any(output.iterdir()))
    except OSError as e:
        raise WriteError(output, str(e.strerror or e)) from None
    if taken:
        raise UsageError(f"{output} exists and is not a tfm export: choose a new or empty "
                         "--output folder")


def read_export(folder: Path) -> tuple[dict[str, Any], TokenizerPair]:
    """The manifest and tokenizers of an export, after checking every file's sha256.
    Raises CheckpointError for a damaged or foreign folder."""
    folder = Path(folder)
    try:
        manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CheckpointError(f"export {folder}: cannot read {MANIFEST}: {e}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise CheckpointError(f"{folder} is not a tfm export (format {FORMAT} expected in {MANIFEST})")
    for name, digest in manifest.get("files", {}).items():
        path = folder / name
        if not path.is_file():
            raise CheckpointError(f"export {folder} is incomplete: {name} is missing")
        if file_sha256(path) != digest:
            raise CheckpointError(f"export {folder} is damaged: {name} does not match its sha256 "
                                  f"in {MANIFEST}")
    try:
        tokenizers = TokenizerPair.load(folder)
    except (OSError, ValueError, KeyError) as e:
        raise CheckpointError(f"export {folder}: cannot load its tokenizer: {e}") from None
    return manifest, tokenizers
