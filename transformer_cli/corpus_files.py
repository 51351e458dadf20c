"""Corpus files in a local folder: the one rule every reader of a folder follows (data.corpus's
files, read from data.source or $TFM_DATA_SOURCE, and the folders of synthetic.*.text).

A corpus file holds the text of one stem (a split's: train, val, test_2016_flickr; or any name)
in one language, one sentence a line: `<stem>.<lang>` (plain UTF-8) or `<stem>.<lang>.gz` (the
same, gzipped), whichever the folder holds. A corpus may allow only some names (Multi30k and
the corpora known by name: the gzipped files whose checksums tfm knows) or names of its own (a
plugin's: `ParallelCorpus.file_names`). A folder holding two names of one stem and language
(`train.de` beside `train.de.gz`) is refused, naming both: they may differ, and neither is the
obvious one to read; a folder holding none is refused, naming the folder, the stem and the
names looked for. (From a URL, where nothing can be listed, the names are asked for in order:
the gzipped one first.)
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from .errors import UsageError

GZ = ".gz"


def file_names(stem: str, lang: str) -> list[str]:
    """The names the file of `stem` in `lang` may have: gzipped, then plain."""
    return [f"{stem}.{lang}{GZ}", f"{stem}.{lang}"]


def find_corpus_file(folder: Path, stem: str, lang: str, names: Sequence[str] | None = None) -> Path:
    """The file of `stem` in `lang` in `folder`: the one of `names` (default: `file_names`) the
    folder holds. None, or more than one: a UsageError naming them (see the module docstring)."""
    names = list(names or file_names(stem, lang))
    found = [folder / name for name in names if (folder / name).is_file()]
    if not found:
        raise UsageError(f"{folder} has no {lang} file of {stem!r}: looked for {' or '.join(names)}")
    if len(found) > 1:
        raise UsageError(
            f"{folder} holds the {lang} text of {stem!r} twice, as {' and '.join(p.name for p in found)}: "
            "keep one of them"
        )
    return found[0]


def corpus_files(folder: Path, lang: str) -> list[Path]:
    """Every corpus file of `lang` in `folder` (`*.<lang>`, `*.<lang>.gz`), one per stem, in the
    order of their names; a stem in both forms is refused (`find_corpus_file`). None: []."""
    names = sorted(p.name for p in folder.iterdir() if p.is_file())
    stems = [stem for stem in (_stem(name, lang) for name in names) if stem is not None]
    return [find_corpus_file(folder, stem, lang) for stem in dict.fromkeys(stems)]


def _stem(name: str, lang: str) -> str | None:
    """The stem of a corpus file of `lang` named `name`, or None when it is none."""
    for suffix in (f".{lang}", f".{lang}{GZ}"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return None
