"""What a corpus known by name is: `ParallelCorpus`, one seams.CORPORA entry (data.corpus:
where its files are, their checksums and names; data/sources.py has tfm's and reads them),
and `NamedText`, one seams.TEXT_CORPORA entry (a monolingual corpus, synthetic.*.text;
synthetic/corpora.py has tfm's and reads them).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from ..corpus_files import file_names


class ParallelCorpus:
    """A parallel corpus by name (data.corpus): where its files are when no source is given,
    the checksums they must have, the names they may have. Its own keys (data.corpus_options)
    are read with its `settings` and given to each method as `options` (None: it has none)."""

    settings: ClassVar[type | None] = None

    def default_source(self, options: Any) -> str | None:
        """The folder or URL read when data.source and $TFM_DATA_SOURCE are not set (None:
        one of them is required)."""
        return None

    def checksums(self, options: Any) -> Mapping[str, str]:
        """The sha256 each file must have, by file name (data.sha256 adds to them)."""
        return {}

    def file_names(self, stem: str, lang: str, options: Any) -> list[str]:
        """The names the file of split `stem` in `lang` may have: from a URL, the first the
        server has; in a folder, the one it holds (corpus_files.py)."""
        return file_names(stem, lang)


@dataclass(frozen=True)
class NamedText:
    """A monolingual corpus tfm knows by name: files `<stem>.<lang>.gz` at `url`."""

    url: str
    stems: tuple[str, ...]
    sha256: Mapping[str, str]

    def names(self, lang: str) -> list[str]:
        return [f"{stem}.{lang}.gz" for stem in self.stems]
