"""The manifest of a preprocessed folder (`<data.dir>/<name>/manifest.json`), typed: what
`tfm preprocess` built the folder from and with, what it holds, and every file's checksum.

data/preprocess.py writes it; data/prepared.py and everything after read it through
`DataManifest.read` (records.from_json checks every field).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..records import from_json, to_json

FORMAT_VERSION = 2  # 2: memory-mapped shards (1: one torch file per split)
FileRecord = dict[str, Any]  # fsutil.file_record: size, mtime_ns, sha256


@dataclass(frozen=True)
class Lengths:
    """Tokens per sentence on one side of a split."""

    mean: float
    max: int


@dataclass(frozen=True)
class SplitSummary:
    pairs: int
    src_len: Lengths
    tgt_len: Lengths
    # The share of the split's token ids that are <unk>, per side (None: an older tfm's folder).
    # Under a parent's tokenizers the training split's is the new text they cannot encode.
    unk_rate: Rates | None = None


@dataclass(frozen=True)
class VocabSizes:
    src: int
    tgt: int


@dataclass(frozen=True)
class Rates:
    """A share per side (source, target)."""

    src: float
    tgt: float


@dataclass(frozen=True)
class Dropped:
    """Training pairs left out by preprocessing."""

    empty_train_pairs: int
    too_long_train_pairs: int


@dataclass(frozen=True, kw_only=True)
class Origin:
    """What a folder is built from and with, known before anything is encoded."""

    fingerprint: str  # the corpus files and every setting the ids depend on
    settings_fingerprint: str  # the settings alone (may the folder stand in for a lost source?)
    created: str
    source: str  # the folder or URL the corpus came from
    files: dict[str, str]  # corpus file name -> sha256
    src_lang: str
    tgt_lang: str
    tokenizer: str  # tokenizer.kind
    source_files: dict[str, FileRecord] = field(default_factory=dict)  # resolved path -> record
    tokenizer_from: dict[str, Any] | None = None  # the parent model whose tokenizers encoded it


@dataclass(frozen=True, kw_only=True)
class DataManifest(Origin):
    """A complete folder's manifest: its origin, then what encoding produced."""

    vocab_size: VocabSizes
    joint_vocab: bool
    id_dtype: str  # of the memory-mapped ids
    shards: dict[str, list[int]]  # split -> pairs per shard
    splits: dict[str, SplitSummary]
    dropped: Dropped
    oov_rate_val: Rates
    versions: dict[str, str]  # of the packages that built it
    elapsed_s: float
    tokenizer_sha256: str | None = None  # tokenizers.vocabulary_digest of the folder's tokenizers
    outputs: dict[str, FileRecord] | None = None  # every file written -> record (None: older tfm)
    format: int = FORMAT_VERSION

    @classmethod
    def load(cls, folder: Path) -> DataManifest:
        """The folder's manifest; OSError when it cannot be read, OtherFormat when another tfm
        wrote it, ValueError (RecordError) naming what is malformed."""
        raw = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
        stated = raw.get("format") if isinstance(raw, dict) else None
        if isinstance(stated, int) and stated != FORMAT_VERSION:
            raise OtherFormat(stated)
        return from_json(cls, raw, "manifest.json")

    @classmethod
    def read(cls, folder: Path) -> DataManifest | None:
        """The folder's manifest, or None when it is missing, unreadable, of another format or
        malformed."""
        try:
            return cls.load(folder)
        except (OSError, ValueError):
            return None

    def write(self, folder: Path) -> None:
        (folder / "manifest.json").write_text(json.dumps(to_json(self), indent=2) + "\n", encoding="utf-8")

    @property
    def langs(self) -> tuple[str, str]:
        return self.src_lang, self.tgt_lang


class OtherFormat(ValueError):
    """A manifest of another format version (an older tfm's folder)."""

    def __init__(self, stated: int):
        super().__init__(f"format {stated}, now {FORMAT_VERSION}")
        self.stated = stated
