"""synthetic/cache.py: TranslationCache, translations kept by line key per model and search:
appended a chunk at a time, read back in any order, missing lines told apart, and a chunk cut
short by a kill dropped when the cache is opened again (the files then equal those of a run
never stopped)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from transformer_cli.errors import TfmError
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


def test_a_cache_of_another_model_or_a_damaged_one_is_refused(tmp_path):
    folder = tmp_path / "c"
    TranslationCache(folder, IDENTITY).append(keys(1), ["one"])
    with pytest.raises(TfmError, match="a translation cache of another model or search"):
        TranslationCache(folder, {**IDENTITY, "beam_size": 5})
    (folder / "lines.txt").write_bytes(b"")
    with pytest.raises(TfmError, match="lines.txt: shorter than .*cache.json records: a damaged translation cache"):
        TranslationCache(folder, IDENTITY)
    (folder / STATE).write_text("{")
    with pytest.raises(TfmError, match="cache.json: unreadable"):
        TranslationCache(folder, IDENTITY)


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
