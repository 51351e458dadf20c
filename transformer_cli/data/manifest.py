"""The manifest of a preprocessed folder (`<data.dir>/<name>/manifest.json`), typed: what
`tfm preprocess` built the folder from and with, what it holds, and every file's checksum.

data/preprocess.py writes it; data/prepared.py and everything after read it through
`DataManifest.read` (records.from_json checks every field). `summary_table` is what `tfm
preprocess` prints of it.
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


@dataclass(frozen=True)
class PartRecord:
    """A source of pairs beside the corpus (data/parts.py), as encoded into the folder: the
    input files' first `size` bytes by language (a later input that starts with them is
    appended to), and the sums its split's summary is made of, kept to add to."""

    inputs: dict[str, FileRecord]  # lang -> size, sha256 (of those bytes)
    pairs: int
    tokens: list[int]  # summed lengths, source and target
    longest: list[int]
    unknown: list[int]  # <unk> ids
    empty: int  # pairs left out: a side without text
    too_long: int  # pairs left out: a side past data.train_max_len


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
    parts: dict[str, PartRecord] = field(default_factory=dict)  # sources beside the corpus, by split name
    # the training split as encoded, its sums and its files' bytes (data/corpus_append.py; None: an older tfm)
    corpus: PartRecord | None = None
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

    @property
    def training_pairs(self) -> int:
        """Distinct training pairs: the corpus's and each part's, once (not as a mix repeats them)."""
        return sum(self.splits[name].pairs for name in ("train", *self.parts))

    @property
    def training_unk_rate(self) -> Rates | None:
        """The <unk> share of the training ids, corpus and parts together (None: not recorded)."""
        summaries = [self.splits[name] for name in ("train", *self.parts)]
        if any(s.unk_rate is None for s in summaries):
            return None
        weights = [(s.pairs * s.src_len.mean, s.pairs * s.tgt_len.mean) for s in summaries]
        totals = [max(1e-9, sum(w[i] for w in weights)) for i in range(2)]
        shares = [
            sum(w[i] * getattr(s.unk_rate, side) for w, s in zip(weights, summaries))
            for i, side in enumerate(("src", "tgt"))
        ]
        return Rates(round(shares[0] / totals[0], 5), round(shares[1] / totals[1], 5))


class OtherFormat(ValueError):
    """A manifest of another format version (an older tfm's folder)."""

    def __init__(self, stated: int):
        super().__init__(f"format {stated}, now {FORMAT_VERSION}")
        self.stated = stated


def summary_table(manifest: DataManifest) -> str:
    """The short table printed at the end of `tfm preprocess`."""
    src, tgt = manifest.langs
    rows = [("split", "pairs", f"{src} mean/max", f"{tgt} mean/max")]
    for split, s in manifest.splits.items():
        rows.append(
            (split, str(s.pairs), f"{s.src_len.mean:.1f} / {s.src_len.max}", f"{s.tgt_len.mean:.1f} / {s.tgt_len.max}")
        )
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = ["  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))) for r in rows]
    vocab, oov = manifest.vocab_size, manifest.oov_rate_val
    joint = " (joint)" if manifest.joint_vocab else ""
    lines.append(f"vocab ({manifest.tokenizer}){joint}: {src} {vocab.src}, {tgt} {vocab.tgt}")
    lines.append(f"OOV rate on val: {src} {100 * oov.src:.2f}%, {tgt} {100 * oov.tgt:.2f}%")
    rate = manifest.training_unk_rate if "train" in manifest.splits else None
    if manifest.tokenizer_from and rate is not None:
        lines.append(unknown_line(rate, manifest.langs))
    dropped = manifest.dropped
    left_out = [("train", dropped.empty_train_pairs, dropped.too_long_train_pairs)]
    left_out += [(name, part.empty, part.too_long) for name, part in manifest.parts.items()]
    for split, empty, too_long in left_out:
        if empty or too_long:
            lines.append(f"dropped from {split}: {empty} empty, {too_long} longer than data.train_max_len")
    return "\n".join(lines)


def unknown_line(rate: Rates, langs: tuple[str, str]) -> str:
    """What the preprocess log and summary say of the training split's <unk> rate under a
    parent's tokenizers: how much of the new text they cannot encode."""
    return (
        f"<unk> rate on train (the parent's tokenizers): {langs[0]} {100 * rate.src:.2f}%, "
        f"{langs[1]} {100 * rate.tgt:.2f}% of the tokens"
    )
