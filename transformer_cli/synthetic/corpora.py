"""Where monolingual text comes from: the entries of `synthetic.*.text`, each resolved to
verified local files of one language.

    multi30k-task2   a named corpus (`TEXT_CORPORA`): its files and checksums are known; they are
                     read from $TFM_TEXT_SOURCES/<name>/, else from a folder of that name beside
                     $TFM_DATA_SOURCE (the layout of a machine holding both Multi30k tasks), else
                     downloaded from its public URL into data.cache_dir/<name>/, and verified
    parallel         the side of the config's own training corpus in that language
    PATH             a file, or a folder: its files named *.<lang> or *.<lang>.gz, in name order
                     (one per stem: corpus_files.py)
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ..config import Config
from ..config_synthetic import PARALLEL as PARALLEL  # (the entry `parallel`: named here too)
from ..contracts.corpus import NamedText
from ..corpus_files import corpus_files
from ..data.sources import SOURCE_ENV, current_sha256, explicit_source, fetch_corpus, fetch_named, resolve_source
from ..errors import UsageError
from ..seams import TEXT_CORPORA

TEXT_SOURCES_ENV = "TFM_TEXT_SOURCES"


@dataclass(frozen=True)
class TextFile:
    """One verified local file of monolingual text."""

    path: Path
    sha256: str


# Five independent captions per training image, German and English (Elliott et al. 2016):
# seams.TEXT_CORPORA's `multi30k-task2`.
MULTI30K_TASK2 = NamedText(
    url="https://raw.githubusercontent.com/multi30k/dataset/master/data/task2/raw/",
    stems=tuple(f"train.{i}" for i in range(1, 6)),
    sha256={
        "train.1.de.gz": "0002241b52aba5160c08d644ea0d64a9bf46a2dfffcf619c9e3cdaa55b357004",
        "train.1.en.gz": "a0e057f07a9733199c0d755d77f6d583dc6f40a3180734b1130a216e2fdf3a3b",
        "train.2.de.gz": "ac7c29258b90aec0b64d677c5bfc831fc402e6296d0aa9cc7a3433ddbff85c37",
        "train.2.en.gz": "d79dd70a9eafb2d1fe40151621278c4ae69b3c148c5052a53d7c7a41bf3ba023",
        "train.3.de.gz": "ec5e6508813814aa31311b34e26e24f903dd7701f8d0668313259b7f975d7aa0",
        "train.3.en.gz": "86e16fdcc699bcb6bca0f87c3cf1051f7de5ee3674dd588cedc5200194282749",
        "train.4.de.gz": "bcee8ac6eb47d8a7dc8cff47d9a0fbd80b4363cfda22021bacd297f9604221a4",
        "train.4.en.gz": "3771b84e010ad6197806d2a1188cb07c12149e3e0d178dd5966dee5763733686",
        "train.5.de.gz": "dccb0ca6ff25e0b1f0d385f59fb809184e0db89622d88371725e3ec46d43bfc0",
        "train.5.en.gz": "73988689307fe836994eae59735dc840c15da9775455fa76e6ed22606a042a91",
    },
)


def text_files(cfg: Config, entries: list[str], lang: str, key: str) -> list[TextFile]:
    """The files of `entries` (`key`: the config key naming them, for errors), in order."""
    out: list[TextFile] = []
    for entry in entries:
        if entry == PARALLEL:
            out.append(_parallel_side(cfg, lang))
        elif (named := TEXT_CORPORA.find(entry)) is not None:
            out += _named(cfg, entry, named, lang)
        elif Path(entry).exists():
            out += _local(Path(entry), lang, key)
        else:
            raise UsageError(
                f"{key}: {entry!r} is not a known corpus ({', '.join(TEXT_CORPORA.names())}), "
                f"`{PARALLEL}`, or an existing file or folder"
            )
    return out


def _parallel_side(cfg: Config, lang: str) -> TextFile:
    files = fetch_corpus(cfg.data, explicit_source(cfg.data) or resolve_source(cfg.data))
    found = next(f for f in files if f.split == "train" and f.lang == lang)
    return TextFile(found.path, found.sha256)


def _named(cfg: Config, name: str, corpus: NamedText, lang: str) -> list[TextFile]:
    source = _named_folder(name) or corpus.url
    cache = Path(cfg.data.cache_dir) / name
    return [TextFile(path, digest) for path, digest in fetch_named(source, corpus.names(lang), cache, corpus.sha256)]


def _named_folder(name: str) -> str | None:
    """A local folder holding the named corpus, where the environment says there is one."""
    for root in (os.environ.get(TEXT_SOURCES_ENV), _beside_data_source()):
        if root and (Path(root) / name).is_dir():
            return str(Path(root) / name)
    return None


def _beside_data_source() -> str | None:
    given = os.environ.get(SOURCE_ENV)
    return str(Path(given).resolve().parent) if given and Path(given).is_dir() else None


def _local(path: Path, lang: str, key: str) -> list[TextFile]:
    """A file, or a folder's corpus files of `lang` (corpus_files.py)."""
    if path.is_file():
        return [TextFile(path, current_sha256(path))]
    try:
        found = corpus_files(path, lang)
    except UsageError as e:
        raise UsageError(f"{key}: {e}") from None
    if not found:
        raise UsageError(f"{key}: {path} holds no *.{lang} or *.{lang}.gz file")
    return [TextFile(p, current_sha256(p)) for p in found]
