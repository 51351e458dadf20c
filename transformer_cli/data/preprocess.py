"""`tfm preprocess`: fetch and verify a corpus, fit tokenizers, encode every split.

Output folder (`<data.dir>/<name>/`), written as a whole into a temporary folder and then
renamed into place, so an interrupted run never leaves a half-written one:

    manifest.json        inputs (checksums), fingerprint, counts, vocab sizes, versions
    config.yaml          the fully resolved config
    tokenizer.json       tokenizer kind, options, vocabularies (+ spm.*.model files)
    {train,val,test}.pt  encoded ids (see `EncodedSplit`)
    {val,test}.{lang}.txt  raw text, the references for BLEU

A folder whose fingerprint (config sections that shape the data + input checksums + format
version) matches is reused as is.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config import Config
from ..errors import TfmError, UsageError
from ..provenance import package_versions
from .sources import SPLITS, CorpusFile, fetch_corpus, read_parallel, resolve_source
from .tokenizers import TokenizerPair, fit_tokenizers
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
        if self._tokenizers is None:
            self._tokenizers = TokenizerPair.load(self.folder)
        return self._tokenizers

    def split(self, name: str) -> "EncodedSplit":
        from .batching import EncodedSplit  # torch: imported only when data is used

        return EncodedSplit.load(self.folder / f"{name}.pt")

    def text(self, split: str, lang: str) -> list[str]:
        return (self.folder / f"{split}.{lang}.txt").read_text(encoding="utf-8").split("\n")[:-1]


def data_fingerprint(cfg: Config, files: list[CorpusFile]) -> str:
    """What the output depends on: data/tokenizer settings (not paths) and input checksums."""
    data = cfg.to_dict()["data"]
    for path_key in ("source", "dir", "cache_dir"):
        data.pop(path_key)
    payload = {"format": FORMAT_VERSION, "data": data, "tokenizer": cfg.to_dict()["tokenizer"],
               "files": {f"{f.split}.{f.lang}": f.sha256 for f in files}}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def load_prepared(cfg: Config) -> Prepared:
    """The preprocessed folder of `cfg`, which must exist (see `prepare`)."""
    manifest_path = cfg.data_dir / "manifest.json"
    if not manifest_path.is_file():
        raise UsageError(f"no preprocessed data in {cfg.data_dir}: run "
                         f"`tfm preprocess --config {cfg.name}.yaml` first")
    return Prepared(cfg.data_dir, json.loads(manifest_path.read_text(encoding="utf-8")))


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


def prepare(cfg: Config, force: bool = False) -> tuple[Prepared, bool]:
    """Make `cfg`'s preprocessed folder current. Returns it and whether it was (re)built."""
    started = time.monotonic()
    source = resolve_source(cfg.data)
    log.info("source: %s", source)
    files = fetch_corpus(cfg.data, source)
    fingerprint = data_fingerprint(cfg, files)
    manifest_path = cfg.data_dir / "manifest.json"
    if manifest_path.is_file() and not force:
        try:
            old = json.loads(manifest_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            old = {}
        if old.get("fingerprint") == fingerprint:
            return Prepared(cfg.data_dir, old), False
        log.info("inputs or settings changed since the last preprocess: rebuilding %s", cfg.data_dir)

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
        pair, src_ids, tgt_ids = fit_tokenizers(cfg.tokenizer, src_lang, tgt_lang, train_src,
                                                train_tgt, bar.update)
        encoded = {s: (pair.src.encode_batch(text[s][0], bar.update),
                       pair.tgt.encode_batch(text[s][1], bar.update)) for s in EVAL_SPLITS}
    limit = cfg.data.train_max_len
    short = [i for i, (a, b) in enumerate(zip(src_ids, tgt_ids)) if len(a) <= limit and len(b) <= limit]
    encoded["train"] = ([src_ids[i] for i in short], [tgt_ids[i] for i in short])

    stats = {s: {"pairs": len(encoded[s][0]), "src_len": _length_stats(encoded[s][0]),
                 "tgt_len": _length_stats(encoded[s][1])} for s in SPLITS}
    manifest = {
        "format": FORMAT_VERSION,
        "fingerprint": fingerprint,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "source": source,
        "files": {f.path.name: f.sha256 for f in files},
        "src_lang": src_lang,
        "tgt_lang": tgt_lang,
        "tokenizer": cfg.tokenizer.kind,
        "vocab_size": {"src": pair.src.vocab_size, "tgt": pair.tgt.vocab_size},
        "joint_vocab": pair.joint,
        "splits": stats,
        "dropped": {"empty_train_pairs": dropped_empty, "too_long_train_pairs": len(src_ids) - len(short)},
        "oov_rate_val": {"src": round(_oov_rate(encoded["val"][0]), 5),
                         "tgt": round(_oov_rate(encoded["val"][1]), 5)},
        "versions": package_versions(),
        "elapsed_s": round(time.monotonic() - started, 2),
    }
    _write_folder(cfg, pair, encoded, text, manifest)
    return Prepared(cfg.data_dir, manifest, pair), True


def _write_folder(cfg: Config, pair: TokenizerPair, encoded: dict[str, tuple[list, list]],
                  text: dict[str, tuple[list[str], list[str]]], manifest: dict[str, Any]) -> None:
    """Write everything into a temp folder, then swap it in with renames."""
    final = cfg.data_dir
    from .batching import EncodedSplit

    tmp = final.parent / f".{final.name}.tmp-{os.getpid()}"
    old = final.parent / f".{final.name}.old-{os.getpid()}"
    try:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        for split, (src, tgt) in encoded.items():
            EncodedSplit.from_lists(src, tgt).save(tmp / f"{split}.pt")
        for split in EVAL_SPLITS:
            for lang, lines in zip((cfg.data.src_lang, cfg.data.tgt_lang), text[split]):
                (tmp / f"{split}.{lang}.txt").write_text("".join(f"{x}\n" for x in lines),
                                                         encoding="utf-8")
        pair.save(tmp)
        (tmp / "config.yaml").write_text(cfg.to_yaml(), encoding="utf-8")
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
        if final.exists():
            os.replace(final, old)
        os.replace(tmp, final)
    except OSError as e:
        shutil.rmtree(tmp, ignore_errors=True)
        if old.exists() and not final.exists():
            os.replace(old, final)
        raise TfmError(f"cannot write preprocessed data to {final}: {e.strerror or e}") from None
    shutil.rmtree(old, ignore_errors=True)


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
