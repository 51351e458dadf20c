"""Whether a prepared folder is still current: the fingerprints of what shapes it (the config
sections that shape the data, the inputs' checksums, the format version), the tokenizers it
must hold (a parent's, `GivenTokenizers`, or its own fitted ones with a token of their own for
each mark the training mix writes), and the folder's files as its manifest lists them."""

from __future__ import annotations

import copy
import hashlib
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config import Config, TokenizerConfig
from ..config_values import as_before
from ..tokenizers.pair import TokenizerPair
from ..tokenizers.text_marks import MARKS
from .manifest import FORMAT_VERSION, DataManifest
from .prepared import verify_folder
from .sources import CorpusFile

log = logging.getLogger("tfm")


def _settings(cfg: Config, reserved: tuple[str, ...]) -> dict[str, Any]:
    """The config values that shape the preprocessed data (paths excluded; keys added since
    folders were prepared, at their defaults, too: config_values.as_before); `reserved`: only
    for a folder prepared before the training mix declared its marks (`LEGACY_MARKS`)."""
    data = as_before(cfg.data)
    for key in ("source", "dir", "cache_dir", "min_train_pairs"):
        data.pop(key)
    out = {"format": FORMAT_VERSION, "data": data, "tokenizer": as_before(cfg.tokenizer)}
    return {**out, "reserved": list(reserved)} if reserved else out


# Before the training mix declared the marks its transforms write (training/mix_plan.py), every
# folder with parts reserved all three and counted them in its fingerprint: such a folder is
# still current (it holds every mark a mix may need).
LEGACY_MARKS = MARKS


def data_fingerprints(cfg: Config, files: list[CorpusFile]) -> tuple[str, str]:
    """The fingerprint a folder of these inputs and settings is built with, and the one an
    earlier version gave it when it had parts."""
    return data_fingerprint(cfg, files), data_fingerprint(cfg, files, LEGACY_MARKS)


def data_fingerprint(cfg: Config, files: list[CorpusFile], reserved: tuple[str, ...] = ()) -> str:
    """What the corpus's splits depend on: data/tokenizer settings (not paths) and input
    checksums (parts beside the corpus: `Prepared.fingerprint`)."""
    payload = {**_settings(cfg, reserved), "files": {f"{f.split}.{f.lang}": f.sha256 for f in files}}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def settings_fingerprint(cfg: Config, reserved: tuple[str, ...] = ()) -> str:
    """Like `data_fingerprint` without the inputs: known before the corpus is fetched."""
    return hashlib.sha256(json.dumps(_settings(cfg, reserved), sort_keys=True).encode()).hexdigest()


@dataclass(frozen=True)
class GivenTokenizers:
    """Tokenizers to encode the corpus with instead of fitting new ones: a parent model's, for a
    run that continues training it (train.init_from). `parent` says where they come from (its
    sha256 and how it was named) and goes into the manifest; `settings`, their tokenizer
    settings, go into the folder's config.yaml in place of the config's."""

    pair: TokenizerPair
    parent: dict[str, Any]
    settings: TokenizerConfig | None = None

    @property
    def digest(self) -> str:
        return self.pair.vocabulary_digest()


def encoded_with(cfg: Config, given: GivenTokenizers | None) -> Config:
    """`cfg` with the tokenizer settings the folder is encoded with (the given tokenizers'): its
    config.yaml."""
    if given is None or given.settings is None:
        return cfg
    out = copy.copy(cfg)  # (a record: not validated again with the config's other sections)
    out.tokenizer = given.settings
    return out


def tokenizers_differ(
    folder: Path, old: DataManifest, given: GivenTokenizers | None, reserved: tuple[str, ...]
) -> str | None:
    """Why a folder's tokenizers are not the ones asked for (None: they are): given ones must
    have the same vocabularies; without, the folder must hold its own fitted ones, with a token
    of its own for each `reserved` mark."""
    if given is None:
        if old.tokenizer_from:
            return "its tokenizers came from a parent model"
        lacking = lacking_marks(folder, reserved)
        return f"its tokenizers lack {lacking} of the marks the training mix writes" if lacking else None
    if old.tokenizer_sha256 != given.digest:
        return "it was encoded with other tokenizers than the parent model's (or their growth for this run)"
    return None


def lacking_marks(folder: Path, reserved: tuple[str, ...]) -> int:
    """How many of the `reserved` marks the folder's source tokenizer has no token of its own
    for (all of them when it cannot be read: verify_folder then says why)."""
    if not reserved:
        return 0
    try:
        src = TokenizerPair.load(folder).src
    except (OSError, ValueError, KeyError, TypeError, RuntimeError):
        return len(reserved)
    # a token of its own: the mark, or SentencePiece's `▁<mark>` (tokenizers/subword.py)
    return sum(not any(mark in token for token in src.id_to_token(src.encode_batch([mark])[0])) for mark in reserved)


def still_current(
    folder: Path,
    old: DataManifest,
    fingerprints: tuple[str, ...],
    verify: bool,
    given: GivenTokenizers | None,
    reserved: tuple[str, ...],
) -> bool:
    """Whether the folder was built from these inputs, settings and tokenizers (`fingerprints`:
    today's, or an earlier version's) and is undamaged (every file read when `verify`)."""
    if old.fingerprint not in fingerprints:
        log.info("inputs or settings changed since the last preprocess: rebuilding %s", folder)
        return False
    other = tokenizers_differ(folder, old, given, reserved)
    if other is not None:
        log.info("%s: rebuilding %s", other, folder)
        return False
    problem = verify_folder(folder, old, full=verify)
    if problem is not None:
        log.warning("warning: the preprocessed data in %s is damaged (%s): rebuilding it", folder, problem)
    return problem is None
