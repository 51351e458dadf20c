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

import time
from pathlib import Path
from typing import Any

from ..checkpoint import Checkpoint, CheckpointError
from ..config import ModelConfig
from ..config_values import build_section
from ..contracts.exporter import Exporter
from ..errors import UsageError
from ..export_manifest import ExportManifest, is_export
from ..fsutil import WriteError, atomic_write_folder, file_sha256, remove_dead_work_folders
from ..tokenizers.pair import TokenizerPair
from .engine import import_ctranslate2, weight_type


def export_checkpoint(
    read: Checkpoint, checkpoint: Path, output: Path, quantization: str = "none"
) -> tuple[ExportManifest, float]:
    """Write the CTranslate2 export of a tfm model (`read`, from the file or folder
    `checkpoint`) to the folder `output` (replacing an earlier export there); returns its
    manifest and the seconds it took. All the work happens inside the work folder of
    `atomic_write_folder`, so a stop or failure at any point leaves `output` as it was and no
    work folder behind."""
    from ..inference.translate import model_from_checkpoint
    from .ct2_spec import build_spec

    started = time.perf_counter()
    ct2 = import_ctranslate2("tfm export")
    weights = weight_type(quantization)
    output = Path(output)
    check_output(output)
    written: list[ExportManifest] = []

    def build(folder: Path) -> None:
        model, tokenizers = model_from_checkpoint(read, checkpoint)  # (what does not fit: CheckpointError)
        refusals = CT2_EXPORTER.refusals(read)
        if refusals:
            raise UsageError(f"cannot export: {'; '.join(refusals)}")
        spec = build_spec(model, tokenizers)
        spec.optimize(quantization=weights)
        spec.save(str(folder))
        tokenizers.save(folder)
        manifest = ExportManifest.new(
            "ctranslate2",
            checkpoint,
            read,
            folder,
            engine_version=ct2.__version__,
            quantization=quantization,
            weights=weights,
            checkpoint_file_sha256=file_sha256(checkpoint),
        )
        manifest.write(folder)
        written.append(manifest)

    atomic_write_folder(output, build)
    return written[0], round(time.perf_counter() - started, 3)


class Ct2Exporter(Exporter):
    """`tfm export --format ctranslate2`: the folder above, run by CTranslate2."""

    engine = "ctranslate2"
    extra = "ctranslate2"

    def refusals(self, checkpoint: Checkpoint) -> list[str]:
        from .ct2_spec import refusals

        return refusals(checkpoint.architecture, build_section(ModelConfig, checkpoint.model_config, "model"))

    def export(self, model: Checkpoint, source: Path, output: Path, options: Any) -> tuple[ExportManifest, float]:
        return export_checkpoint(model, source, output, options.quantization)

    def describe(self, manifest: ExportManifest) -> str:
        return f"ctranslate2, {manifest.details.get('weights')} weights"


CT2_EXPORTER = Ct2Exporter()


def check_output(output: Path) -> None:
    """Refuse an `--output` that holds something other than an earlier export (exit 2), or
    that cannot be looked into (a WriteError naming it, exit 1); then remove the work folders
    that killed exports (or other writers) left beside it, whatever their names, once their
    processes are gone."""
    try:
        taken = output.exists() and not is_export(output) and not (output.is_dir() and not any(output.iterdir()))
    except OSError as e:
        raise WriteError(output, str(e.strerror or e)) from None
    if taken:
        raise UsageError(f"{output} exists and is not a tfm export: choose a new or empty --output folder")
    try:
        remove_dead_work_folders(output.parent)
    except OSError as e:
        raise WriteError(output, str(e.strerror or e)) from None


def read_export(folder: Path) -> tuple[ExportManifest, TokenizerPair]:
    """The manifest and tokenizers of an export, after checking every file's sha256.
    Raises CheckpointError for a damaged or foreign folder."""
    manifest = ExportManifest.read(folder)
    try:
        tokenizers = TokenizerPair.load(Path(folder))
    except (OSError, ValueError, KeyError) as e:
        raise CheckpointError(f"export {folder}: cannot load its tokenizer: {e}") from None
    return manifest, tokenizers
