"""`tfm preprocess`: fetch and verify a corpus, fit tokenizers, encode every split.

Output folder (`<data.dir>/<name>/`), written as a whole into a temporary folder and then
renamed into place, so an interrupted run never leaves a half-written one:

    manifest.json        inputs (checksums), fingerprint, counts, vocab sizes, versions
    config.yaml          the fully resolved config
    tokenizer.json       tokenizer kind, options, vocabularies (+ spm.*.model files)
    {train,val,test}.pt  encoded ids (see `EncodedSplit`)
    {train,val,test}.{lang}.txt  raw text: the kept training pairs (re-encoded per epoch by
                         subword sampling or source noise) and the references for BLEU

A folder whose fingerprint (config sections that shape the data + input checksums + format
version) matches, and whose files still match the sizes and SHA-256 sums its manifest lists,
is reused as is; a damaged one is rebuilt. The manifest records the source it was built from,
so a later command with no source given reuses it (an offline re-run), and when the source
cannot be reached at all, a folder built with the same settings is used with a warning.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config import Config
from ..errors import TfmError, UsageError
from ..fsutil import (WriteError, atomic_write_folder, file_record, recorded_sha256,
                      remove_stale_work_folders)
from ..provenance import package_versions
from .sources import (SPLITS, CorpusFile, explicit_source, fetch_corpus, read_parallel,
                      resolve_source, sha256_file)
from .tokenizers import TokenizerPair, fit_tokenizers
from .truecase import Truecaser
from .vocab import UNK

if TYPE_CHECKING:
    from .batching import EncodedSplit

FORMAT_VERSION = 1
EVAL_SPLITS = ("val", "test")
log = logging.getLogger("tfm")


@dataclass
class Prepared:
    """A preprocessed corpus folder, loaded lazily."""

    folder: Path
    manifest: dict[str, Any]
    _tokenizers: TokenizerPair | None = field(default=None, repr=False)

    @property
    def tokenizers(self) -> TokenizerPair:
        """The folder's tokenizers, with the source truecaser preprocessing learned from the
        training sources (unless the tokenizer lowercases): models trained on this folder carry
        it. A folder written before the truecaser was stored has it learned here, once."""
        if self._tokenizers is None:
            try:
                self._tokenizers = TokenizerPair.load(self.folder)
            except (OSError, ValueError, KeyError, TypeError, RuntimeError) as e:
                raise damaged(self.folder / "tokenizer.json", e) from None
            pair = self._tokenizers
            if pair.recaser is None and not pair.src.lowercase:
                pair.recaser = Truecaser.fit(self.text("train", self.manifest["src_lang"]))
        return self._tokenizers

    def split(self, name: str) -> EncodedSplit:
        from .batching import EncodedSplit  # torch: imported only when data is used

        path = self.folder / f"{name}.pt"
        try:
            return EncodedSplit.load(path)
        except Exception as e:  # torch raises many kinds for a truncated or garbled file
            raise damaged(path, e) from None

    def text(self, split: str, lang: str) -> list[str]:
        path = self.folder / f"{split}.{lang}.txt"
        try:
            return path.read_text(encoding="utf-8").split("\n")[:-1]
        except (OSError, UnicodeDecodeError) as e:
            raise damaged(path, e) from None


def damaged(path: Path, error: BaseException) -> TfmError:
    """The one-line error for a preprocessed file that cannot be read."""
    reason = getattr(error, "strerror", None) or str(error).splitlines()[0] or type(error).__name__
    return TfmError(f"preprocessed file {path} is damaged or unreadable ({reason}): run "
                    "`tfm preprocess --force` with the same config to rebuild it")


def _settings(cfg: Config) -> dict[str, Any]:
    """The config values that shape the preprocessed data (paths excluded)."""
    data = cfg.to_dict()["data"]
    for key in ("source", "dir", "cache_dir", "min_train_pairs"):
        data.pop(key)
    return {"format": FORMAT_VERSION, "data": data, "tokenizer": cfg.to_dict()["tokenizer"]}


def data_fingerprint(cfg: Config, files: list[CorpusFile]) -> str:
    """What the output depends on: data/tokenizer settings (not paths) and input checksums."""
    payload = {**_settings(cfg), "files": {f"{f.split}.{f.lang}": f.sha256 for f in files}}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def settings_fingerprint(cfg: Config) -> str:
    """Like `data_fingerprint` without the inputs: known before the corpus is fetched."""
    return hashlib.sha256(json.dumps(_settings(cfg), sort_keys=True).encode()).hexdigest()


def load_prepared(cfg: Config) -> Prepared:
    """The preprocessed folder of `cfg`, which must exist (see `prepare`)."""
    manifest_path = cfg.data_dir / "manifest.json"
    if not manifest_path.is_file():
        raise UsageError(f"no preprocessed data in {cfg.data_dir}: run "
                         f"`tfm preprocess --config {cfg.name}.yaml` first")
    manifest = _read_manifest(cfg.data_dir)
    if manifest is None:
        raise damaged(manifest_path, ValueError("not a manifest"))
    return Prepared(cfg.data_dir, manifest)


def _read_manifest(folder: Path) -> dict[str, Any] | None:
    """The folder's manifest, or None when it is missing or unreadable."""
    try:
        manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return manifest if isinstance(manifest, dict) else None


def verify_folder(folder: Path, manifest: dict[str, Any], full: bool = False) -> str | None:
    """Why the folder no longer holds what its manifest lists (size, sha256), or None if intact.
    A file that kept the size and modification time the manifest records is taken as intact
    without reading it, unless `full`."""
    outputs = manifest.get("outputs")
    langs = (manifest.get("src_lang"), manifest.get("tgt_lang"))
    if not isinstance(outputs, dict) or not {f"{s}.{lang}.txt" for s in SPLITS for lang in langs} <= set(outputs):
        return "its manifest lists no checksums of some files (made by an older tfm)"
    for name, expected in outputs.items():
        path = folder / name
        try:
            if not full and recorded_sha256(path, expected) == expected["sha256"]:
                continue
            if path.stat().st_size != expected["size"] or sha256_file(path) != expected["sha256"]:
                return f"{name} does not match its checksum"
        except (OSError, TfmError):
            return f"{name} is missing or unreadable"
        except (TypeError, KeyError):
            return "its manifest is malformed"
    return None


def _progress_bar(total: int, desc: str):
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="sent", disable=not sys.stdout.isatty(),
                leave=False, dynamic_ncols=True)


def _length_stats(seqs: list[list[int]]) -> dict[str, float]:
    lengths = [len(s) for s in seqs]
    return {"mean": round(sum(lengths) / max(1, len(lengths)), 2), "max": max(lengths, default=0)}


def _oov_rate(seqs: list[list[int]]) -> float:
    total = sum(len(s) for s in seqs)
    return sum(s.count(UNK) for s in seqs) / max(1, total)


def _choose_source(cfg: Config, old: dict[str, Any] | None) -> str:
    """The configured source (option, config, environment); else the one the last preprocess
    used, when it was a local folder that still exists; else the corpus's public URL."""
    given = explicit_source(cfg.data)
    if given is not None:
        return given
    recorded = (old or {}).get("source")
    if isinstance(recorded, str) and Path(recorded).is_dir():
        log.info("using the source recorded by the last preprocess: %s", recorded)
        return recorded
    return resolve_source(cfg.data)


def prepare(cfg: Config, force: bool = False, check_stop: Callable[[], None] | None = None,
            verify: bool = False) -> tuple[Prepared, bool]:
    """Make `cfg`'s preprocessed folder current. Returns it and whether it was (re)built.

    Corpus and prepared files that kept the size and modification time recorded when they were
    last hashed are not read again (a start does not re-hash gigabytes); `verify` reads them all.
    `check_stop` is called between units of work (it may raise to abort; nothing is left behind).
    """
    started = time.monotonic()
    folder = cfg.data_dir
    removed = remove_stale_work_folders(folder)
    if removed:
        log.info("removed %d work folder(s) left by an interrupted preprocess beside %s", removed, folder)
    old = _read_manifest(folder) if (folder / "manifest.json").is_file() else None
    source = _choose_source(cfg, old)
    log.info("source: %s", source)
    try:
        files = fetch_corpus(cfg.data, source, None if verify or old is None else old.get("source_files"))
    except UsageError:
        raise
    except TfmError as e:  # unreachable source: fall back on data built with the same settings
        return _stand_in(cfg, old, e, force), False
    fingerprint = data_fingerprint(cfg, files)
    if old is not None and not force and _still_current(folder, old, fingerprint, verify):
        return Prepared(folder, old), False
    pair, encoded, text, dropped = _encode_corpus(cfg, files, check_stop)
    if not pair.src.lowercase:  # learned once, here; stored in tokenizer.json
        pair.recaser = Truecaser.fit(text["train"][0])
    stats = {s: {"pairs": len(encoded[s][0]), "src_len": _length_stats(encoded[s][0]),
                 "tgt_len": _length_stats(encoded[s][1])} for s in SPLITS}
    manifest = {
        "format": FORMAT_VERSION,
        "fingerprint": fingerprint,
        "settings_fingerprint": settings_fingerprint(cfg),
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "source": source,
        "files": {f.path.name: f.sha256 for f in files},
        "source_files": {str(f.path.resolve()): file_record(f.path, f.sha256) for f in files},
        "src_lang": cfg.data.src_lang,
        "tgt_lang": cfg.data.tgt_lang,
        "tokenizer": cfg.tokenizer.kind,
        "vocab_size": {"src": pair.src.vocab_size, "tgt": pair.tgt.vocab_size},
        "joint_vocab": pair.joint,
        "splits": stats,
        "dropped": dropped,
        "oov_rate_val": {"src": round(_oov_rate(encoded["val"][0]), 5),
                         "tgt": round(_oov_rate(encoded["val"][1]), 5)},
        "versions": package_versions(),
        "elapsed_s": round(time.monotonic() - started, 2),
    }
    _write_folder(cfg, pair, encoded, text, manifest)
    return Prepared(folder, manifest, pair), True


def _stand_in(cfg: Config, old: dict[str, Any] | None, error: TfmError, force: bool) -> Prepared:
    """The existing folder in place of a source that cannot be reached, when it was built with
    the same settings and is intact; else the error."""
    folder = cfg.data_dir
    if old is None or old.get("settings_fingerprint") != settings_fingerprint(cfg) or force:
        raise error
    problem = verify_folder(folder, old)
    if problem is not None:
        raise TfmError(f"{error}; the preprocessed data in {folder} cannot stand in: {problem}") from None
    log.warning("warning: %s; using the preprocessed data in %s (built %s from %s)", error, folder,
                old.get("created"), old.get("source"))
    return Prepared(folder, old)


def _still_current(folder: Path, old: dict[str, Any], fingerprint: str, verify: bool) -> bool:
    """Whether the folder was built from these inputs and settings and is undamaged (every
    file read when `verify`)."""
    if old.get("fingerprint") != fingerprint:
        log.info("inputs or settings changed since the last preprocess: rebuilding %s", folder)
        return False
    problem = verify_folder(folder, old, full=verify)
    if problem is not None:
        log.warning("warning: the preprocessed data in %s is damaged (%s): rebuilding it", folder, problem)
    return problem is None


def _encode_corpus(cfg: Config, files: list[CorpusFile], check_stop: Callable[[], None] | None
                   ) -> tuple[TokenizerPair, dict[str, tuple[list, list]],
                              dict[str, tuple[list[str], list[str]]], dict[str, int]]:
    """Read every split, fit the tokenizers on the training pairs, encode, filter by length.

    Returns the tokenizers, the ids and the raw text per split (train: the kept pairs), and
    how many training pairs were dropped (empty, too long).
    """
    by_key = {(f.split, f.lang): f for f in files}
    src_lang, tgt_lang = cfg.data.src_lang, cfg.data.tgt_lang
    text = {s: read_parallel(by_key[s, src_lang].path, by_key[s, tgt_lang].path) for s in SPLITS}
    train_src, train_tgt = text["train"]
    nonempty = [i for i, (a, b) in enumerate(zip(train_src, train_tgt)) if a.strip() and b.strip()]
    dropped_empty = len(train_src) - len(nonempty)
    kept = nonempty[: cfg.data.limit_train]  # limit_train None keeps all
    train_src, train_tgt = [train_src[i] for i in kept], [train_tgt[i] for i in kept]

    n_work = 2 * len(train_src) + sum(2 * len(text[s][0]) for s in EVAL_SPLITS)
    with _progress_bar(n_work, f"tokenizing ({cfg.tokenizer.kind})") as bar:
        def tick(n: int) -> None:
            bar.update(n)
            if check_stop is not None:
                check_stop()

        pair, src_ids, tgt_ids = fit_tokenizers(cfg.tokenizer, src_lang, tgt_lang, train_src,
                                                train_tgt, tick)
        encoded = {s: (pair.src.encode_batch(text[s][0], tick),
                       pair.tgt.encode_batch(text[s][1], tick)) for s in EVAL_SPLITS}
    limit = cfg.data.train_max_len
    short = [i for i, (a, b) in enumerate(zip(src_ids, tgt_ids)) if len(a) <= limit and len(b) <= limit]
    if len(short) < cfg.data.min_train_pairs:
        raise UsageError(f"only {len(short)} training pairs are left of {len(src_ids) + dropped_empty} "
                         f"({dropped_empty} empty, {len(src_ids) - len(short)} longer than "
                         f"data.train_max_len={limit} tokens); at least data.min_train_pairs="
                         f"{cfg.data.min_train_pairs} are needed")
    encoded["train"] = ([src_ids[i] for i in short], [tgt_ids[i] for i in short])
    text["train"] = ([train_src[i] for i in short], [train_tgt[i] for i in short])  # for re-encoding
    dropped = {"empty_train_pairs": dropped_empty, "too_long_train_pairs": len(src_ids) - len(short)}
    return pair, encoded, text, dropped


def _write_folder(cfg: Config, pair: TokenizerPair, encoded: dict[str, tuple[list, list]],
                  text: dict[str, tuple[list[str], list[str]]], manifest: dict[str, Any]) -> None:
    """Write everything into a work folder, then swap it in (`atomic_write_folder`)."""
    from .batching import EncodedSplit

    def build(folder: Path) -> None:
        for split, (src, tgt) in encoded.items():
            EncodedSplit.from_lists(src, tgt).save(folder / f"{split}.pt")
        for split in SPLITS:
            for lang, lines in zip((cfg.data.src_lang, cfg.data.tgt_lang), text[split]):
                (folder / f"{split}.{lang}.txt").write_text("".join(f"{x}\n" for x in lines),
                                                            encoding="utf-8")
        pair.save(folder)
        (folder / "config.yaml").write_text(cfg.to_yaml(), encoding="utf-8")
        manifest["outputs"] = {p.name: file_record(p, sha256_file(p))
                               for p in sorted(folder.iterdir()) if p.is_file()}
        (folder / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")

    try:
        atomic_write_folder(cfg.data_dir, build)
    except WriteError as e:  # a full disk: said as the data's problem
        raise TfmError(f"cannot write preprocessed data to {cfg.data_dir}: {e.reason}") from None


def summary_table(manifest: dict[str, Any]) -> str:
    """The short table printed at the end of `tfm preprocess`."""
    src, tgt = manifest["src_lang"], manifest["tgt_lang"]
    rows = [("split", "pairs", f"{src} mean/max", f"{tgt} mean/max")]
    for split, s in manifest["splits"].items():
        rows.append((split, str(s["pairs"]), f"{s['src_len']['mean']:.1f} / {s['src_len']['max']}",
                     f"{s['tgt_len']['mean']:.1f} / {s['tgt_len']['max']}"))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = ["  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths)))
             for r in rows]
    vocab, oov = manifest["vocab_size"], manifest["oov_rate_val"]
    joint = " (joint)" if manifest.get("joint_vocab") else ""
    lines.append(f"vocab ({manifest['tokenizer']}){joint}: {src} {vocab['src']}, {tgt} {vocab['tgt']}")
    lines.append(f"OOV rate on val: {src} {100 * oov['src']:.2f}%, {tgt} {100 * oov['tgt']:.2f}%")
    dropped = manifest["dropped"]
    if any(dropped.values()):
        lines.append(f"dropped from train: {dropped['empty_train_pairs']} empty, "
                     f"{dropped['too_long_train_pairs']} longer than data.train_max_len")
    return "\n".join(lines)
