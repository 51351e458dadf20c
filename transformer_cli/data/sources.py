"""Where raw parallel corpora come from, and reading them strictly.

A source is a URL (http, https, file) or a local folder holding one file per split and
language, named `<stem>.<lang>` or `<stem>.<lang>.gz` (the rule: corpus_files.py).
Downloads stream into a cache with their SHA-256 computed on the way, and are kept only when
the size and checksum are right.
data.corpus names a `ParallelCorpus` (contracts/corpus.py; seams.CORPORA): Multi30k (task 1, raw), a public corpus
with known checksums, or `files`, any other; a plugin adds more (its own keys:
data.corpus_options).
"""

from __future__ import annotations

import codecs
import gzip
import hashlib
import http.client
import itertools
import logging
import os
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
import zlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config import DataConfig
from ..contracts.corpus import ParallelCorpus
from ..corpus_files import find_corpus_file
from ..errors import TfmError, UsageError
from ..fsutil import file_sha256, recorded_sha256
from ..seams import CORPORA

SOURCE_ENV = "TFM_DATA_SOURCE"
log = logging.getLogger("tfm")


@dataclass(frozen=True)
class PublicCorpus(ParallelCorpus):
    """A public corpus of gzipped files at `url` whose checksums tfm knows."""

    url: str
    sha256: Mapping[str, str]

    def default_source(self, options: Any) -> str | None:
        return self.url

    def checksums(self, options: Any) -> Mapping[str, str]:
        return self.sha256

    def file_names(self, stem: str, lang: str, options: Any) -> list[str]:
        return [f"{stem}.{lang}.gz"]


MULTI30K = PublicCorpus(
    "https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw/",
    {
        "train.de.gz": "726e39b2fa9eb9ffb6dc763fb35a179f80fae06ffc5d28b6ace5faa883de28a6",
        "train.en.gz": "d79cfa999dd4c51d2cb42499b6796d5a882c3a8a961923c25a898c90f8bbd56f",
        "val.de.gz": "f0cba2f995189cf5770f29a8a9a537a3ad3f51657ad873405082ff6863a5e75a",
        "val.en.gz": "14f7d25ddd868909a9213e361768460edcacdd6ab9d1e77b92560dc10c10dc28",
        "test_2016_flickr.de.gz": "9204244e408ccb38d2a55cfcd344df15005fc42a07a6e55ca6c52b6ababb8cc8",
        "test_2016_flickr.en.gz": "611d361c6334bc7246101d48097c13cf5c4413c5befc793cc629934359d532d9",
    },
)
FILES = ParallelCorpus()  # your own files: data.source names them, data.sha256 their checksums

SPLITS = ("train", "val", "test")


class NotOnServer(TfmError):
    """The server answered 404 for a file (another name may still be there)."""


DOWNLOAD_ATTEMPTS = 3
_CHUNK = 1 << 16


@dataclass(frozen=True)
class CorpusFile:
    """One verified local file of the corpus."""

    split: str
    lang: str
    path: Path
    sha256: str


def current_sha256(path: Path, record: Mapping[str, Any] | None = None) -> str:
    """SHA-256 of a file, or the one in `record` while the file keeps the size and modification
    time recorded with it (`fsutil.recorded_sha256`); an unreadable file is a UsageError naming it."""
    known = recorded_sha256(path, record)
    if known is not None:
        return known
    try:
        return file_sha256(path)
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror or e}") from None


def explicit_source(data: DataConfig) -> str | None:
    """The source the user gave: data.source (or --source), else $TFM_DATA_SOURCE, else None."""
    return data.source or os.environ.get(SOURCE_ENV) or None


def _corpus(data: DataConfig) -> tuple[ParallelCorpus, Any]:
    """data.corpus's entry and its options (data.corpus_options, read by its settings)."""
    return CORPORA[data.corpus], CORPORA.options(data.corpus, data.corpus_options)


def resolve_source(data: DataConfig) -> str:
    """The source to use: data.source, else $TFM_DATA_SOURCE, else the corpus's own (for
    Multi30k, its public URL)."""
    given = explicit_source(data)
    if given is not None:
        return given
    corpus, options = _corpus(data)
    default = corpus.default_source(options)
    if default is None:
        raise UsageError(
            f"data.source is required for data.corpus: {data.corpus} (a folder or URL; or set {SOURCE_ENV})"
        )
    return default


def known_checksums(data: DataConfig) -> dict[str, str]:
    corpus, options = _corpus(data)
    return {**corpus.checksums(options), **data.sha256}


def _candidate_names(data: DataConfig, split: str, lang: str) -> tuple[str, list[str]]:
    """The stem of `split` and the names its file in `lang` may have."""
    corpus, options = _corpus(data)
    stem = getattr(data.splits, split)
    return stem, corpus.file_names(stem, lang, options)


def _is_url(source: str) -> bool:
    return urllib.parse.urlparse(source).scheme in ("http", "https")


def _verify(path: Path, expected: str | None, record: Mapping[str, Any] | None) -> str:
    actual = current_sha256(path, record)
    if expected is not None and actual != expected:
        raise UsageError(
            f"checksum mismatch for {path}: expected sha256 {expected[:12]}…, "
            f"got {actual[:12]}… (corrupt or wrong file)"
        )
    return actual


def _download(url: str, dest: Path, expected: str | None) -> str:
    """Stream `url` into `dest` (atomically); return its sha256. Retries transient errors."""
    last_error = ""
    for attempt in range(1, DOWNLOAD_ATTEMPTS + 1):
        fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".part", dir=dest.parent)
        try:
            h = hashlib.sha256()
            received = 0
            with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=60) as resp:
                length = resp.headers.get("Content-Length")
                for chunk in iter(lambda: resp.read(_CHUNK), b""):
                    out.write(chunk)
                    h.update(chunk)
                    received += len(chunk)
                out.flush()
                os.fsync(out.fileno())
            if length is not None and received != int(length):
                last_error = f"{url}: truncated ({received} of {length} bytes)"
                continue
            actual = h.hexdigest()
            if expected is not None and actual != expected:
                raise UsageError(
                    f"checksum mismatch for {url}: expected sha256 {expected[:12]}…, "
                    f"got {actual[:12]}… (corrupt download; nothing was cached)"
                )
            os.replace(tmp, dest)
            return actual
        except urllib.error.HTTPError as e:
            error = NotOnServer if e.code == 404 else TfmError
            raise error(f"download failed: {url}: HTTP {e.code} {e.reason}") from None
        except http.client.IncompleteRead as e:
            last_error = f"{url}: truncated ({len(e.partial)} bytes received, {e.expected} missing)"
        except (urllib.error.URLError, http.client.HTTPException, OSError) as e:
            last_error = f"{url}: {getattr(e, 'reason', None) or e}"
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        time.sleep(0.2 * attempt)
    raise TfmError(f"download failed after {DOWNLOAD_ATTEMPTS} attempts: {last_error}")


def _fetch_url(base: str, name: str, cache: Path, expected: str | None, records: Mapping[str, Any]) -> tuple[Path, str]:
    dest = cache / name
    if dest.is_file():
        digest = current_sha256(dest, records.get(str(dest.resolve())))
        if expected is None or digest == expected:
            return dest, digest
        dest.unlink()  # a stale or damaged cache entry: fetch again
    url = base.rstrip("/") + "/" + urllib.parse.quote(name)
    return dest, _download(url, dest, expected)


def fetch_corpus(data: DataConfig, source: str, records: Mapping[str, Any] | None = None) -> list[CorpusFile]:
    """Make every (split, language) file available locally and verified; return them.
    `records` (`fsutil.file_record`s by resolved path, from the last preprocess) spare reading
    the files that kept their size and modification time since."""
    sums, records = known_checksums(data), records or {}
    files: list[CorpusFile] = []
    if _is_url(source):
        cache = _cache_folder(Path(data.cache_dir) / data.corpus)
    else:
        folder = _source_folder(source)
    for split in SPLITS:
        for lang in (data.src_lang, data.tgt_lang):
            stem, names = _candidate_names(data, split, lang)
            if _is_url(source):
                path, digest = _fetch_url_first(source, names, cache, sums, records)
            else:
                path = _local_file(folder, stem, lang, names)
                digest = _verify(path, sums.get(path.name), records.get(str(path.resolve())))
            files.append(CorpusFile(split, lang, path, digest))
    return files


def _local_file(folder: Path, stem: str, lang: str, names: list[str]) -> Path:
    """The file of `stem` in `lang` in the source folder (errors say it is the data source)."""
    try:
        return find_corpus_file(folder, stem, lang, names)
    except UsageError as e:
        raise UsageError(f"data source {e}") from None


def fetch_named(source: str, names: list[str], cache: Path, sums: Mapping[str, str]) -> list[tuple[Path, str]]:
    """The files `names` from `source` (a URL: downloaded into the folder `cache` once; a local
    folder: read in place), each with its sha256, checked against `sums` where it names one."""
    if _is_url(source):
        _cache_folder(cache)
        return [_fetch_url(source, name, cache, sums.get(name), {}) for name in names]
    folder, out = _source_folder(source), []
    for name in names:
        path = folder / name
        if not path.is_file():
            raise UsageError(f"{folder} is missing {name}")
        out.append((path, _verify(path, sums.get(name), None)))
    return out


def _cache_folder(cache: Path) -> Path:
    try:
        cache.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise TfmError(f"cannot create cache folder {cache}: {e.strerror}") from None
    return cache


def _source_folder(source: str) -> Path:
    folder = Path(urllib.parse.urlparse(source).path if source.startswith("file:") else source)
    if not folder.is_dir():
        raise UsageError(f"data source folder not found: {folder}")
    return folder


def _fetch_url_first(
    base: str, names: list[str], cache: Path, sums: dict[str, str], records: Mapping[str, Any]
) -> tuple[Path, str]:
    """Fetch the first of `names` that the server has (`.gz` before plain text)."""
    for i, name in enumerate(names):
        try:
            return _fetch_url(base, name, cache, sums.get(name), records)
        except NotOnServer:
            if i + 1 < len(names):
                continue
            raise
    raise AssertionError("unreachable")


Start = tuple[int, int]  # where reading begins: a byte offset, and the number of the line there


def iter_line_blocks(path: Path, block: int, start: Start = (0, 1)) -> Iterator[list[str]]:
    """The lines of a UTF-8 text file (gzip when named .gz), without line endings, in lists of
    up to `block` lines, read as they are needed (decoded a block at a time); from `start`
    (a byte offset where a line begins, that line's number: of a plain file). A byte-order
    mark at the start (editors on Windows write one) is not text: it is dropped, with a
    warning naming the file, rather than becoming part of the first word.

    Raises UsageError naming the file and line for non-UTF-8 bytes or a damaged gzip file.
    """
    opener = gzip.open if path.name.endswith(".gz") else open
    first = start[1]  # the number of the block's first line
    try:
        with opener(path, "rb") as f:
            f.seek(start[0])
            while raw := list(itertools.islice(f, block)):
                if first == 1 and raw[0].startswith(codecs.BOM_UTF8):
                    raw[0] = raw[0][len(codecs.BOM_UTF8) :]
                    log.warning("warning: %s starts with a UTF-8 byte-order mark: left out", path)
                try:
                    text = b"".join(raw).decode("utf-8")
                except UnicodeDecodeError:
                    _raise_bad_line(path, raw, first)
                lines = text.split("\n")
                if text.endswith("\n"):
                    lines.pop()
                yield [line.rstrip("\r") for line in lines] if "\r" in text else lines
                first += len(raw)
    except (OSError, EOFError, zlib.error) as e:
        raise UsageError(f"{path}: cannot read: {e}") from None


def _raise_bad_line(path: Path, raw: list[bytes], first: int) -> None:
    for number, line in enumerate(raw, start=first):
        try:
            line.decode("utf-8")
        except UnicodeDecodeError as e:
            raise UsageError(
                f"{path}:{number}: not valid UTF-8 (byte 0x{line[e.start]:02x} at column {e.start + 1})"
            ) from None


def with_text(
    chunks: Iterable[tuple[list[str], list[str]]], empty: list[int], limit: int | None = None
) -> Iterator[tuple[list[str], list[str]]]:
    """The pairs of `chunks` with text on both sides (the others counted in `empty[0]`), at
    most `limit` of them, chunk by chunk."""
    left = limit
    for sources, targets in chunks:
        kept = [i for i, (a, b) in enumerate(zip(sources, targets)) if a.strip() and b.strip()]
        empty[0] += len(sources) - len(kept)
        if left is not None:
            kept = kept[:left]
            left -= len(kept)
        if kept:
            yield [sources[i] for i in kept], [targets[i] for i in kept]
        if left == 0:
            return


def read_lines(path: Path) -> list[str]:
    """All lines of a text file at once (see `iter_line_blocks`)."""
    return [line for lines in iter_line_blocks(path, 1 << 16) for line in lines]


def iter_parallel(
    src: Path, tgt: Path, chunk_pairs: int, starts: tuple[Start, Start] | None = None
) -> Iterator[tuple[list[str], list[str]]]:
    """An aligned pair of files in chunks of `chunk_pairs` line pairs, read as needed (from
    `starts`, each file's: then what follows may hold no text). At the end, a file with no
    text, or files of different lengths, raise UsageError naming them (before the last chunk
    is given)."""
    at = starts or ((0, 1), (0, 1))
    readers = iter_line_blocks(src, chunk_pairs, at[0]), iter_line_blocks(tgt, chunk_pairs, at[1])
    has_text = [False, False]
    lengths = [0, 0]
    pending: tuple[list[str], list[str]] | None = None
    while True:
        a, b = next(readers[0], []), next(readers[1], [])
        if not a and not b:
            break
        lengths[0] += len(a)
        lengths[1] += len(b)
        for side, lines in enumerate((a, b)):
            has_text[side] = has_text[side] or any(line.strip() for line in lines)
        if len(a) != len(b):  # one file ended: count the rest of the other, then complain
            lengths[0] += sum(len(x) for x in readers[0])
            lengths[1] += sum(len(x) for x in readers[1])
            break
        if pending is not None:
            yield pending
        pending = a, b
    for path, text in zip((src, tgt), has_text):
        if not text and lengths[0] == lengths[1] and starts is None:
            raise UsageError(f"{path}: empty corpus")
    if lengths[0] != lengths[1]:
        raise UsageError(f"misaligned corpus: {src} has {lengths[0]} lines but {tgt} has {lengths[1]}")
    if pending is not None:
        yield pending


def read_parallel(src: Path, tgt: Path) -> tuple[list[str], list[str]]:
    """Read an aligned pair of files; both must be non-empty and have equally many lines."""
    src_lines: list[str] = []
    tgt_lines: list[str] = []
    for a, b in iter_parallel(src, tgt, 1 << 16):
        src_lines += a
        tgt_lines += b
    return src_lines, tgt_lines
