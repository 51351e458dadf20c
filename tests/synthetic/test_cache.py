"""synthetic/cache.py: TranslationCache, translations kept by line key per model and search:
appended a chunk at a time, read back in any order, missing lines told apart, and a chunk cut
short by a kill dropped when the cache is opened again (the files then equal those of a run
never stopped)."""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from helpers import on_a_small_disk

from transformer_cli.errors import TfmError
from transformer_cli.synthetic import cache as cache_module
from transformer_cli.synthetic.cache import STATE, Cost, TranslationCache, cache_folder

IDENTITY = {"models": ["abc"], "search": "beam", "beam_size": 4}


def keys(*values: int) -> np.ndarray:
    return np.array(values, dtype=np.uint64)


def test_translations_are_kept_by_key_and_read_in_any_order(tmp_path):
    cache = TranslationCache(tmp_path / "c", IDENTITY)
    assert cache.rows == 0 and cache.missing(keys(1, 2)).tolist() == [True, True]
    cache.append(keys(5, 1), ["fünf", "eins"])
    cache.append(keys(2**64 - 1), ["groß"])
    assert cache.missing(keys(1, 2, 2**64 - 1)).tolist() == [False, True, False]
    assert list(cache.translations(keys(2**64 - 1, 5, 1, 5))) == ["groß", "fünf", "eins", "fünf"]
    again = TranslationCache(tmp_path / "c", IDENTITY)  # opened anew: the same
    assert again.rows == 3 and again.keys.tolist() == [5, 1, 2**64 - 1]
    assert list(again.translations(keys(1))) == ["eins"] and list(again.translations(keys())) == []
    with pytest.raises(TfmError, match="lines missing from the translation cache"):
        list(again.translations(keys(7)))


def test_a_chunk_cut_short_is_dropped_when_the_cache_is_opened(tmp_path):
    folder = tmp_path / "c"
    cache = TranslationCache(folder, IDENTITY)
    cache.append(keys(1, 2), ["one", "two"])
    clean = {name: (folder / name).read_bytes() for name in ("keys.u64", "ends.u64", "lines.txt")}
    with open(folder / "lines.txt", "ab") as f:  # a kill after the lines, before cache.json
        f.write(b"three\n")
    with open(folder / "keys.u64", "ab") as f:
        f.write(keys(3).tobytes())
    reopened = TranslationCache(folder, IDENTITY)
    assert reopened.rows == 2 and reopened.missing(keys(3)).tolist() == [True]
    assert {name: (folder / name).read_bytes() for name in clean} == clean
    reopened.append(keys(3), ["three"])
    assert list(TranslationCache(folder, IDENTITY).translations(keys(3, 1))) == ["three", "one"]


def test_a_cache_of_another_model_or_with_an_unreadable_state_is_refused(tmp_path):
    folder = tmp_path / "c"
    TranslationCache(folder, IDENTITY).append(keys(1), ["one"])
    with pytest.raises(TfmError, match="a translation cache of another model or search"):
        TranslationCache(folder, {**IDENTITY, "beam_size": 5})
    (folder / "lines.txt").write_bytes(b"")  # damaged: emptied, with a warning (see below)
    assert TranslationCache(folder, IDENTITY).rows == 0
    (folder / STATE).write_text("{")
    with pytest.raises(TfmError, match="cache.json: unreadable"):
        TranslationCache(folder, IDENTITY)


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"rows": "1"}, "rows has the wrong type (str)"),
        ({"rows": -1}, "rows must be a finite number >= 0 (got -1)"),
        ({"rows": None}, "has no rows"),
        ({"rows": 1.0}, "rows has the wrong type (float)"),
        ({"bytes": -4}, "bytes must be a finite number >= 0 (got -4)"),
        ({"bytes": True}, "bytes has the wrong type (bool)"),
        ({"identity": None}, "has no identity"),
        ({"identity": ["abc"]}, "identity has the wrong type (list)"),
        ({"format": "2"}, "format has the wrong type (str)"),
        ({"cost": 3}, "cost is not a JSON object"),
        ({"cost": {"seconds": "3"}}, "cost: seconds has the wrong type (str)"),
        ({"cost": {"seconds": 1.0, "cpu_seconds": -0.5}}, "cost.cpu_seconds must be a finite number >= 0 (got -0.5)"),
        ({"cost": {"seconds": float("nan")}}, "cost.seconds must be a finite number >= 0 (got nan)"),
    ],
)
def test_a_state_of_any_malformed_shape_is_unreadable_in_one_line_naming_the_field(tmp_path, change, problem):
    """cache.json's whole record is checked when it is read (each field's type and range), so
    a malformed one is the one documented line naming the folder and the field, never a
    ValueError, an OSError or a KeyError from deep in the reader."""
    folder = tmp_path / "c"
    TranslationCache(folder, IDENTITY).append(keys(1), ["one"], Cost(1.0, 0.5))
    state = {**json.loads((folder / STATE).read_text()), **change}
    (folder / STATE).write_text(json.dumps({k: v for k, v in state.items() if v is not None}))
    with pytest.raises(TfmError) as refused:
        TranslationCache(folder, IDENTITY)
    assert str(refused.value).startswith(f"{folder / STATE}: unreadable (")
    assert problem in str(refused.value)
    assert str(refused.value).endswith(f"); remove {folder} to translate again")
    assert "\n" not in str(refused.value)


def test_each_model_and_search_has_its_own_folder(tmp_path):
    a = cache_folder(tmp_path, "back", IDENTITY)
    assert a == cache_folder(tmp_path, "back", dict(reversed(list(IDENTITY.items()))))  # key order aside
    assert a != cache_folder(tmp_path, "back", {**IDENTITY, "beam_size": 5}) and a.name.startswith("back-")
    TranslationCache(a, IDENTITY).append(keys(9), ["nine"])
    state = json.loads((a / STATE).read_text())
    assert (state["identity"], state["rows"], state["bytes"]) == (IDENTITY, 1, 5)


def test_the_cost_of_every_row_is_kept_across_processes_and_a_cut_chunk_costs_nothing(tmp_path):
    """What the translations cost survives the process that made them: a synthesis resumed
    after a kill, or a later night, reports the whole cache's cost beside its own."""
    folder = tmp_path / "c"
    TranslationCache(folder, IDENTITY).append(keys(1, 2), ["one", "two"], Cost(2.0, 1.5))
    with open(folder / "lines.txt", "ab") as f:  # a chunk cut short: its cost never recorded
        f.write(b"three\n")
    again = TranslationCache(folder, IDENTITY)
    assert again.cost == Cost(2.0, 1.5)
    again.append(keys(3), ["three"], Cost(1.0, 0.25))
    again.append(keys(4), ["four"])  # no cost given: none added
    assert TranslationCache(folder, IDENTITY).cost == Cost(3.0, 1.75)
    assert json.loads((folder / STATE).read_text())["cost"] == {"seconds": 3.0, "cpu_seconds": 1.75}


# -- shared by processes --------------------------------------------------------------------

WORKER = """
import sys, time
from pathlib import Path
import numpy as np
from transformer_cli.synthetic.cache import KeyIndex, TranslationCache
folder, n, size, delay, mode = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
wanted = np.arange(1, n + 1, dtype=np.uint64) * np.uint64(7919)
cache = TranslationCache(Path(folder), {"models": ["abc"], "search": "beam", "beam_size": 4})
pending, index, mine = cache.missing(wanted), KeyIndex(wanted), 0
while True:
    rows = cache.claim(wanted, pending, index, size)
    if mode == "hang" and len(rows):
        print("claimed", flush=True)
        time.sleep(600)
    if not len(rows):
        if not pending.any():
            break
        time.sleep(0.02)
        continue
    time.sleep(delay)  # translating
    first = int(wanted[rows[0]])
    cache.append(wanted[rows], [f"{int(k)} of the chunk from {first}" for k in wanted[rows]])
    pending[rows] = False
    mine += len(rows)
cache.close()
print(mine, flush=True)
"""


def worker(folder, n, size, delay=0.0, mode="translate") -> subprocess.Popen:
    args = [sys.executable, "-c", WORKER, str(folder), str(n), str(size), str(delay), mode]
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def one_process_translations(n: int, size: int) -> list[str]:
    """What one process alone puts in the cache: chunks of `size` keys, in order."""
    wanted = [k * 7919 for k in range(1, n + 1)]
    return [f"{k} of the chunk from {wanted[i // size * size]}" for i, k in enumerate(wanted)]


@pytest.mark.parametrize("processes", [2, 3, 5])
def test_processes_sharing_a_cache_translate_each_line_once_in_one_process_chunks(tmp_path, processes):
    n, size = 60, 4
    running = [worker(tmp_path / "c", n, size, delay=0.1) for _ in range(processes)]
    outputs = [p.communicate(timeout=120) for p in running]
    assert all(p.returncode == 0 for p in running), [err for _, err in outputs]
    done = [int(out.split()[-1]) for out, _ in outputs]
    assert sum(done) == n  # no line translated twice
    cache = TranslationCache(tmp_path / "c", IDENTITY)
    wanted = np.arange(1, n + 1, dtype=np.uint64) * np.uint64(7919)
    assert cache.rows == n and list(cache.translations(wanted)) == one_process_translations(n, size)
    assert not list((tmp_path / "c" / "claims").iterdir())  # every claim ended with its process


def test_a_claim_of_a_killed_process_goes_to_the_next_one(tmp_path):
    n, size = 12, 4
    hung = worker(tmp_path / "c", n, size, mode="hang")
    assert hung.stdout is not None and hung.stdout.readline().strip() == "claimed"
    other = worker(tmp_path / "c", n, size)
    time.sleep(1.0)  # the claimed chunk is left to its live owner meanwhile
    assert TranslationCache(tmp_path / "c", IDENTITY).rows == n - size and other.poll() is None
    hung.kill()
    hung.communicate(timeout=60)
    out, err = other.communicate(timeout=60)
    assert other.returncode == 0 and int(out.split()[-1]) == n - size + size, err
    wanted = np.arange(1, n + 1, dtype=np.uint64) * np.uint64(7919)
    assert list(TranslationCache(tmp_path / "c", IDENTITY).translations(wanted)) == one_process_translations(n, size)


def test_appends_go_at_the_recorded_end_whatever_another_writer_left(tmp_path):
    """An earlier tfm appended at a file offset it had seen before another process wrote (a
    stale `tell`): each append now starts where cache.json says the rows end."""
    folder = tmp_path / "c"
    a, b = TranslationCache(folder, IDENTITY), TranslationCache(folder, IDENTITY)
    a.append(keys(1, 2), ["one", "two"])
    b.append(keys(3), ["three"])  # b opened before a's rows: it reads them first
    a.append(keys(4, 3), ["four", "drei"])  # 3 is b's: kept as b made it
    again = TranslationCache(folder, IDENTITY)
    assert again.rows == 4 and list(again.translations(keys(4, 3, 2, 1))) == ["four", "three", "two", "one"]


def test_a_cache_an_earlier_version_damaged_is_emptied_not_trusted(tmp_path, caplog):
    folder = tmp_path / "c"
    folder.mkdir()
    # Two unlocked writers of an earlier tfm: the second chunk's ends start from a stale offset.
    (folder / "lines.txt").write_bytes(b"one\ntwo\nthree\n")
    (folder / "keys.u64").write_bytes(keys(1, 2, 3).tobytes())
    (folder / "ends.u64").write_bytes(np.array([4, 8, 10], dtype=np.uint64).tobytes())
    (folder / STATE).write_text(json.dumps({"identity": IDENTITY, "rows": 3, "bytes": 14}))
    with caplog.at_level(logging.WARNING, logger="tfm"):
        cache = TranslationCache(folder, IDENTITY)
    assert cache.rows == 0 and cache.missing(keys(1, 2, 3)).all()
    assert f"the translation cache {folder} is damaged (ends.u64 does not match lines.txt)" in caplog.text
    assert [(folder / name).stat().st_size for name in ("keys.u64", "ends.u64", "lines.txt")] == [0, 0, 0]
    # one sound, of the same earlier version: kept, and marked as checked
    (folder / "lines.txt").write_bytes(b"one\ntwo\n")
    (folder / "keys.u64").write_bytes(keys(1, 2).tobytes())
    (folder / "ends.u64").write_bytes(np.array([4, 8], dtype=np.uint64).tobytes())
    (folder / STATE).write_text(json.dumps({"identity": IDENTITY, "rows": 2, "bytes": 8}))
    assert list(TranslationCache(folder, IDENTITY).translations(keys(2, 1))) == ["two", "one"]
    assert json.loads((folder / STATE).read_text())["format"] == 2
    # the same key twice (one chunk translated by two processes): not trusted either
    (folder / "keys.u64").write_bytes(keys(1, 1).tobytes())
    with caplog.at_level(logging.WARNING, logger="tfm"):
        assert TranslationCache(folder, IDENTITY).rows == 0
    assert "keys.u64 holds a key twice" in caplog.text


@pytest.mark.parametrize("rows_a_block", [1, 2, 3, 1 << 20])
def test_every_block_of_rows_is_checked_and_looked_up(tmp_path, monkeypatch, caplog, rows_a_block):
    """The check reads ends.u64 a block of rows at a time (and `missing` looks keys up a block at
    a time): a wrong end or a line that does not end with a newline is found in any block, and
    a sound cache passes whatever the block."""
    monkeypatch.setattr(cache_module, "CHECK_ROWS", rows_a_block)
    lines = [b"a\n", b"bb\n", b"ccc\n", b"dddd\n", b"e\n"]
    sound = np.cumsum([len(line) for line in lines]).astype(np.uint64)

    def write(ends: np.ndarray, text: bytes) -> Path:
        folder = tmp_path / f"c{len(list(tmp_path.iterdir()))}"
        folder.mkdir()
        (folder / "lines.txt").write_bytes(text)
        (folder / "keys.u64").write_bytes(keys(1, 2, 3, 4, 5).tobytes())
        (folder / "ends.u64").write_bytes(ends.tobytes())
        (folder / STATE).write_text(json.dumps({"identity": IDENTITY, "rows": 5, "bytes": len(text)}))
        return folder

    folder = write(sound, b"".join(lines))
    assert list(TranslationCache(folder, IDENTITY).translations(keys(5, 1, 4))) == ["e", "a", "dddd"]
    assert TranslationCache(folder, IDENTITY).missing(keys(9, 1, 2, 7, 5)).tolist() == [True, False, False, True, False]
    backwards = sound.copy()
    backwards[3] = backwards[2]  # the fourth line ends where the third does
    moved = b"".join(lines[:3]) + b"dd\ndd" + lines[4]  # the fourth line's newline moved into it
    for ends, text in ((backwards, b"".join(lines)), (sound, moved)):
        with caplog.at_level(logging.WARNING, logger="tfm"):
            assert TranslationCache(write(ends, text), IDENTITY).rows == 0
    assert "ends.u64 does not match lines.txt" in caplog.text
    assert "lines.txt's lines do not end where ends.u64 says" in caplog.text


FULL_DISK = """
import sys
from pathlib import Path
import numpy as np
from transformer_cli.errors import TfmError
from transformer_cli.synthetic.cache import TranslationCache
cache = TranslationCache(Path(sys.argv[1]), {"models": ["abc"]})
try:
    for k in range(1, 10_000):
        cache.append(np.array([k], dtype=np.uint64), ["x" * 2000])
except TfmError as e:
    print(e)
print(TranslationCache(Path(sys.argv[1]), {"models": ["abc"]}).rows == cache.rows, cache.rows > 0)
"""


@pytest.mark.skipif(shutil.which("unshare") is None, reason="unshare: no private mount namespaces here")
def test_a_full_disk_names_the_file_and_counts_only_whole_rows(tmp_path):
    disk = tmp_path / "disk"
    error, counts = on_a_small_disk(tmp_path, "256k", FULL_DISK, "c")
    assert error.startswith(f"cannot write {disk}/c/") or error.startswith(
        f"cannot write the translation cache file {disk}/c/"
    )
    assert error.endswith(": No space left on device") and counts == "True True"
