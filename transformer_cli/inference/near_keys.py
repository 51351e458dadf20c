"""Near-matches' keys computed ahead: each accepted correction's decoder states, as one model
reads it under teacher forcing (near.py's `Keys`), kept on disk beside the store, so a line's
examples are looked up, not read by the model while the line waits.

One folder a model, `<corrections.store>/near-keys/<the model's sha256, 16 hex>/`:

    meta.json     {"sha256", "d_model"}
    keys.bin      float16 rows [tokens, d_model], appended
    values.bin    int32 [tokens]: the token that follows each row's state
    index.bin     20-byte records (pair_key 8 bytes, first row int64, rows int32), appended

The writer (serving/near_keys_worker.py, one a folder: `.writer.lock`) appends a batch's rows,
syncs them, then appends their index records: a reader trusts the index alone, so rows a crash
left without a record are never read (the next writer appends after them). Readers take the
index's complete records as it grows and read a pair's rows with one pread each. Keys computed
on demand are rounded to float16 as these are (`rounded`), so a line decodes the same whichever
way its examples' keys came.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import threading
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

FOLDER = "near-keys"
RECORD = struct.Struct("<8sqi")  # pair_key, first row, rows
KEY_BYTES, VALUE_BYTES = 2, 4  # float16, int32


@dataclass
class Keys:
    """One example pair read by the model: its decoder outputs and the tokens that follow them."""

    keys: Tensor  # [tokens, d_model], float32
    values: Tensor  # [tokens], target ids (the last is <eos>)


def pair_key(source: str, target: str) -> bytes:
    """What the index knows an example pair by (its two texts, hashed)."""
    return hashlib.blake2b(f"{source}\0{target}".encode(), digest_size=8).digest()


def keys_folder(store: Path | str, sha256: str) -> Path:
    """The folder of one model's keys in a store."""
    return Path(store) / FOLDER / sha256[:16]


def rounded(keys: Tensor) -> Tensor:
    """Keys as the files hold them: float16 values, as float32."""
    return keys.half().float()


class KeysFile:
    """The keys computed ahead for one model in one store, as far as its index goes (see the
    module docstring); a folder not (yet) there holds none."""

    def __init__(self, folder: Path):
        self.folder = folder
        self._index: dict[bytes, tuple[int, int]] = {}
        self._read = 0  # bytes of index.bin taken in
        self._d_model = 0
        self._lock = threading.Lock()

    def get(self, pairs: list[tuple[str, str]]) -> dict[tuple[str, str], Keys]:
        """The keys of those of `pairs` that the folder holds."""
        with self._lock:
            self._catch_up()
            found = [(pair, self._index.get(pair_key(*pair))) for pair in pairs]
            if not any(place for _, place in found):
                return {}
            try:
                return {pair: self._rows(*place) for pair, place in found if place is not None}
            except OSError:  # the folder pruned meanwhile: computed on demand
                return {}

    def __len__(self) -> int:
        with self._lock:
            self._catch_up()
            return len(self._index)

    def _catch_up(self) -> None:
        try:
            if not self._d_model:
                self._d_model = int(json.loads((self.folder / "meta.json").read_text())["d_model"])
            with open(self.folder / "index.bin", "rb") as f:
                f.seek(self._read)
                data = f.read()
        except (OSError, ValueError, KeyError, TypeError):
            return
        whole = len(data) - len(data) % RECORD.size
        for key, first, rows in RECORD.iter_unpack(data[:whole]):
            self._index[key] = (first, rows)
        self._read += whole

    def _rows(self, first: int, rows: int) -> Keys:
        d = self._d_model
        with open(self.folder / "keys.bin", "rb") as k, open(self.folder / "values.bin", "rb") as v:
            keys = os.pread(k.fileno(), rows * d * KEY_BYTES, first * d * KEY_BYTES)
            values = os.pread(v.fileno(), rows * VALUE_BYTES, first * VALUE_BYTES)
        if len(keys) != rows * d * KEY_BYTES or len(values) != rows * VALUE_BYTES:
            raise OSError("keys cut short")
        return Keys(
            torch.frombuffer(bytearray(keys), dtype=torch.float16).view(rows, d).float(),
            torch.frombuffer(bytearray(values), dtype=torch.int32).long(),
        )


class KeysWriter:
    """Appends keys to one model's folder (the one writer of it: the caller holds its lock)."""

    def __init__(self, folder: Path, sha256: str):
        self.folder, self.sha256 = folder, sha256
        folder.mkdir(parents=True, exist_ok=True)
        self.known = {key for key, _, _ in self._records()}

    def _records(self) -> list[tuple[bytes, int, int]]:
        try:
            data = (self.folder / "index.bin").read_bytes()
        except FileNotFoundError:
            return []
        return list(RECORD.iter_unpack(data[: len(data) - len(data) % RECORD.size]))

    def append(self, pairs: list[tuple[str, str]], keys: list[Keys]) -> None:
        """Store `keys` (one per pair, all of one width): rows first, synced, then their index."""
        d_model = keys[0].keys.size(1)
        meta = self.folder / "meta.json"
        if not meta.exists():
            tmp = self.folder / ".meta.json.tmp"
            tmp.write_text(json.dumps({"sha256": self.sha256, "d_model": d_model}))
            os.replace(tmp, meta)
        paths = [self.folder / name for name in ("keys.bin", "values.bin", "index.bin")]
        fds = [os.open(p, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644) for p in paths]
        try:
            # after the rows a crash may have left unindexed, both files at the same row
            first = max(os.fstat(fds[1]).st_size // VALUE_BYTES, -(-os.fstat(fds[0]).st_size // (d_model * KEY_BYTES)))
            os.ftruncate(fds[0], first * d_model * KEY_BYTES)
            os.ftruncate(fds[1], first * VALUE_BYTES)
            records, at = [], first
            for pair, k in zip(pairs, keys):
                records.append(RECORD.pack(pair_key(*pair), at, len(k.values)))
                at += len(k.values)
            os.write(fds[0], b"".join(k.keys.half().contiguous().numpy().tobytes() for k in keys))
            os.write(fds[1], b"".join(k.values.int().contiguous().numpy().tobytes() for k in keys))
            os.fsync(fds[0])
            os.fsync(fds[1])
            os.write(fds[2], b"".join(records))
            os.fsync(fds[2])
        finally:
            for fd in fds:
                os.close(fd)
        self.known.update(pair_key(*pair) for pair in pairs)
