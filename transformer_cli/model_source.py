"""What a model argument names (`tfm translate -m`, `tfm.load`, `--checkpoint`): a checkpoint, an
export folder, a Hugging Face folder or Hub id, or a config whose run's published model is meant.
Decided by what is on disk, not by the name's shape."""

from __future__ import annotations

from pathlib import Path

from .config_loading import load_config, resolve_config_path
from .errors import UsageError


def published_model(run_dir: Path, config: str) -> Path:
    """The model a run serves: its published.pt, else its best.pt (`config` names it in errors)."""
    for candidate in (run_dir / "published.pt", run_dir / "best.pt"):
        if candidate.is_file():
            return candidate
    raise UsageError(
        f"no model in {run_dir} (published.pt or best.pt): train one with "
        f"`tfm train -c {config}`, or pass a checkpoint file"
    )


def resolve_model(source: str | Path) -> Path:
    """The model file `source` names, decided by what is there, not by its name:

    - a folder: a `tfm export` folder (`open_backend` checks its manifest) or a Hugging Face
      MarianMT folder;
    - OWNER/NAME that is no path or config here: a model on the Hugging Face Hub (fetched);
    - a binary file (a NUL byte in its first 8 KiB, as git tells binary from text): a
      checkpoint (torch's zip archive; a damaged one is then reported as such);
    - a text file, or a config name found in ./configs/ or among tfm's own: a config, whose
      run's model is used (`published_model`).
    """
    p = Path(source)
    if p.is_dir() or _is_binary(p):
        return p
    if not p.exists():
        try:
            resolve_config_path(str(source))
        except UsageError as e:
            from .hf.folder import locate

            fetched = locate(str(source))  # None unless an OWNER/NAME Hub id (hf.folder.is_hub_id)
            if fetched is not None:
                return fetched
            raise UsageError(f"{source}: no such model file or export folder, and {e}") from None
    cfg = load_config(str(source))
    return published_model(cfg.run_dir, str(source))


def _is_binary(p: Path) -> bool:
    """A file with a NUL byte in its first 8 KiB (as git tells binary from text)."""
    if not p.is_file():
        return False
    with p.open("rb") as f:
        return b"\0" in f.read(8192)


def resolve_models(source: str | Path) -> list[Path]:
    """What `source` names, as a list: a config whose decode.ensemble lists models gives them
    (as written, from the current folder), anything else `resolve_model`'s one model."""
    p = Path(source)
    if not p.is_dir() and not _is_binary(p):  # a config, by name or text
        try:
            ensemble = load_config(str(source)).decode.ensemble
        except UsageError:
            ensemble = []  # resolve_model says what is wrong
        if ensemble:
            return [Path(m) for m in ensemble]
    return [resolve_model(source)]
