"""A model wherever it is, read as a tfm `Checkpoint`, told by what is there:

    a file                  a tfm checkpoint (verified: sha256, weights_only)
    a folder                an export whose engine reads it back as a checkpoint (the
                            read_checkpoint of the seams.ENGINES entry its manifest names:
                            `tfm export --format hf`, verified too), or a Hugging Face
                            MarianMT model without a manifest (its config.json, from
                            transformers); an export of another engine (CTranslate2's: no
                            trainable weights) is refused here, by its engine's name
                            (api.open_backend runs it on that engine)
    OWNER/NAME              a model on the Hugging Face Hub, fetched once (hf/folder.locate),
                            unless it is a path: one that exists, whose OWNER folder exists,
                            or ending like a file (.pt, .pth, .bin, .safetensors, ...; see
                            hf/folder.is_hub_id); a missing path is `checkpoint not found`

Translation (api.open_backend), `train.init_from` (training/parent.py) and both exports use it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from .checkpoint import Checkpoint, CheckpointError
from .errors import UsageError
from .export.engine import is_ct2_model_folder
from .export_manifest import MANIFEST, export_engine
from .seams import ENGINES


def checkpoint_reader(engine: str) -> Callable[[Path], Checkpoint] | None:
    """How the ENGINES entry `engine` reads its exports back as checkpoints (its
    `read_checkpoint`); None: it does not (converted weights, or no such engine)."""
    found = ENGINES.find(engine) if engine in ENGINES else None
    return found.read_checkpoint if found is not None else None


def unread_exports(paths: Sequence[Path]) -> dict[str, str]:
    """The paths among `paths` that are exports of an engine tfm does not read back as
    checkpoints (`checkpoint_reader`), each with that engine's name."""
    engines = {str(p): export_engine(p) for p in paths}
    return {p: e for p, e in engines.items() if e is not None and checkpoint_reader(e) is None}


def read_model(spec: str | Path) -> tuple[Checkpoint, Path]:
    """The model `spec` names and the local path it was read from."""
    from .hf.folder import is_hf_folder, locate, read_folder

    path = locate(str(spec)) or Path(spec)
    if path.is_dir():
        engine = export_engine(path)
        if engine is not None:  # an export: read back only by an engine that keeps weights
            reader = checkpoint_reader(engine)
            if reader is None:
                raise UsageError(
                    f"{path} is an export for the {engine} engine, which tfm does not read back "
                    "as a checkpoint (no trainable weights): give the checkpoint it was exported from"
                )
            checkpoint: Checkpoint = reader(path)
            return checkpoint, path
        if is_ct2_model_folder(path):  # config.json too, but CTranslate2's, not transformers'
            raise CheckpointError(
                f"{path} is a CTranslate2 export folder whose {MANIFEST} is "
                "missing: tfm runs an export only with its manifest (export the "
                "checkpoint again with `tfm export`)"
            )
        if not is_hf_folder(path):
            raise UsageError(f"{path} is a folder but not a model: no tfm export manifest, no transformers config.json")
        return read_folder(path), path
    return Checkpoint.read(path), path
