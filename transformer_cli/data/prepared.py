"""A preprocessed corpus folder (`<data.dir>/<name>/`) as its readers see it: `Prepared`, its
manifest, and the check that its files still hold what the manifest lists.

`data/preprocess.py` builds the folder; training, evaluation and the promotion gate read it
through `load_prepared` (or the `Prepared` that `prepare` returns).
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ..config import Config
from ..errors import TfmError, UsageError, first_line
from ..fsutil import recorded_sha256
from ..tokenizers.pair import TokenizerPair
from .folder_lock import hold_shared, release
from .manifest import DataManifest, OtherFormat
from .shards import ShardedSplit
from .sources import SPLITS, current_sha256


@dataclass
class Prepared:
    """A preprocessed corpus folder, loaded lazily."""

    folder: Path
    manifest: DataManifest
    _tokenizers: TokenizerPair | None = field(default=None, repr=False)

    @property
    def tokenizers(self) -> TokenizerPair:
        """The folder's tokenizers, with the source truecaser learned from the training sources
        (unless the tokenizer lowercases): models trained on this folder carry it."""
        if self._tokenizers is None:
            try:
                self._tokenizers = TokenizerPair.load(self.folder)
            except (OSError, ValueError, KeyError, TypeError, RuntimeError) as e:
                raise damaged(self.folder / "tokenizer.json", e) from None
        return self._tokenizers

    @property
    def fingerprint(self) -> str:
        """The corpus and settings the folder was built from (freshness.data_fingerprint),
        and the parts beside the corpus (data/parts.py) by their inputs' sums."""
        m = self.manifest
        if not m.parts:
            return m.fingerprint
        inputs = {name: {lang: r["sha256"] for lang, r in part.inputs.items()} for name, part in m.parts.items()}
        return hashlib.sha256(json.dumps([m.fingerprint, inputs], sort_keys=True).encode()).hexdigest()

    @property
    def langs(self) -> tuple[str, str]:
        return self.manifest.langs

    def split(self, name: str) -> ShardedSplit:
        """The split's ids and lines, memory-mapped."""
        try:
            return ShardedSplit(self.folder, name, self.langs, self.manifest.id_dtype, self.manifest.shards[name])
        except (OSError, ValueError, KeyError) as e:
            raise damaged(Path(getattr(e, "filename", None) or self.folder / f"{name}.*.bin"), e) from None

    def text_pairs(self, split: str, chunk: int = 10_000) -> Iterator[tuple[list[str], list[str]]]:
        """A split's (or part's) text as (sources, targets) chunks of `chunk` lines, read as
        they are used (for the training split, which memory need not hold)."""
        paths = [self.folder / f"{split}.{lang}.txt" for lang in self.langs]
        try:
            with open(paths[0], encoding="utf-8") as src, open(paths[1], encoding="utf-8") as tgt:
                while True:
                    sources = [line.rstrip("\n") for line in itertools.islice(src, chunk)]
                    targets = [line.rstrip("\n") for line in itertools.islice(tgt, chunk)]
                    if not sources and not targets:
                        return
                    yield sources, targets
        except (OSError, UnicodeDecodeError) as e:
            raise damaged(Path(getattr(e, "filename", None) or paths[0]), e) from None

    def text(self, split: str, lang: str) -> list[str]:
        """All lines of a split's text on one side (for the small evaluation splits)."""
        path = self.folder / f"{split}.{lang}.txt"
        try:
            return path.read_text(encoding="utf-8").split("\n")[:-1]
        except (OSError, UnicodeDecodeError) as e:
            raise damaged(path, e) from None


def damaged(path: Path, error: BaseException) -> TfmError:
    """The one-line error for a preprocessed file that cannot be read."""
    reason = getattr(error, "strerror", None) or first_line(error)
    return TfmError(
        f"preprocessed file {path} is damaged or unreadable ({reason}): run "
        "`tfm preprocess --force` with the same config to rebuild it"
    )


def load_prepared(cfg: Config, hold: bool = False) -> Prepared:
    """The preprocessed folder of `cfg`, which must exist (see `preprocess.prepare`); held
    for reading when `hold`, until the caller's `folder_lock.release(cfg.data_dir)`."""
    if hold:
        hold_shared(cfg.data_dir)
    try:
        return _load_prepared(cfg)
    except BaseException:
        if hold:
            release(cfg.data_dir)
        raise


def _load_prepared(cfg: Config) -> Prepared:
    manifest_path = cfg.data_dir / "manifest.json"
    if not manifest_path.is_file():
        raise UsageError(f"no preprocessed data in {cfg.data_dir}: run `tfm preprocess --config {cfg.name}.yaml` first")
    try:
        manifest = DataManifest.load(cfg.data_dir)
    except OtherFormat as e:
        raise UsageError(
            f"the preprocessed data in {cfg.data_dir} was made by an older tfm ({e}): "
            f"run `tfm preprocess --config {cfg.name}.yaml` to rebuild it"
        ) from None
    except (OSError, ValueError) as e:
        raise damaged(manifest_path, e) from None
    return Prepared(cfg.data_dir, manifest)


def verify_folder(folder: Path, manifest: DataManifest, full: bool = False) -> str | None:
    """Why the folder no longer holds what its manifest lists (size, sha256), or None if intact.
    A file that kept the size and modification time the manifest records is taken as intact
    without reading it, unless `full`."""
    outputs = manifest.outputs
    if outputs is None or not {f"{s}.{lang}.txt" for s in SPLITS for lang in manifest.langs} <= set(outputs):
        return "its manifest lists no checksums of some files (made by an older tfm)"
    for name, expected in outputs.items():
        path = folder / name
        try:
            if not full and recorded_sha256(path, expected) == expected["sha256"]:
                continue
            if path.stat().st_size != expected["size"] or current_sha256(path) != expected["sha256"]:
                return f"{name} does not match its checksum"
        except (OSError, TfmError):
            return f"{name} is missing or unreadable"
        except (TypeError, KeyError):
            return "its manifest is malformed"
    return None
