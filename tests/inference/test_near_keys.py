"""near_keys.py: keys computed ahead, written by one writer and read by others as the index
grows; rows a crash left unindexed never read; and a line decoded with keys from the files
exactly as with keys the model reads while it waits (the same float16 rounding)."""

from __future__ import annotations

import os

import pytest
import torch

import transformer_cli as tfm
from transformer_cli.inference.near_keys import Keys, KeysFile, KeysWriter, keys_folder, pair_key, rounded
from transformer_cli.inference.outputs import Example, NearSettings

PAIRS = [("Ein mann sieht einen ball.", "A tall man kicks a red ball."), ("Ein hut.", "A hat.")]


def _keys(rows: int, d_model: int = 4, seed: int = 0) -> Keys:
    g = torch.Generator().manual_seed(seed)
    return Keys(rounded(torch.randn(rows, d_model, generator=g)), torch.arange(rows))


def test_what_one_writes_another_reads_as_the_index_grows(tmp_path) -> None:
    folder = keys_folder(tmp_path / "store", "ab" * 32)
    reader = KeysFile(folder)
    assert reader.get(PAIRS) == {} and len(reader) == 0  # no folder yet: none
    writer = KeysWriter(folder, "ab" * 32)
    first, second = _keys(3, seed=1), _keys(5, seed=2)
    writer.append(PAIRS[:1], [first])
    got = reader.get(PAIRS)
    assert list(got) == [PAIRS[0]] and torch.equal(got[PAIRS[0]].keys, first.keys)
    writer.append(PAIRS[1:], [second])
    got = reader.get(PAIRS)
    assert torch.equal(got[PAIRS[1]].keys, second.keys) and torch.equal(got[PAIRS[1]].values, second.values)
    assert len(reader) == 2 and KeysWriter(folder, "ab" * 32).known == {pair_key(*p) for p in PAIRS}


def test_rows_a_crash_left_without_their_index_are_never_read(tmp_path) -> None:
    folder = tmp_path / "keys"
    writer = KeysWriter(folder, "cd" * 32)
    writer.append(PAIRS[:1], [_keys(3, seed=1)])
    with open(folder / "keys.bin", "ab") as f:  # killed after part of a batch's rows
        f.write(os.urandom(2 * 4 * 2 + 3))
    later = _keys(2, seed=3)
    KeysWriter(folder, "cd" * 32).append(PAIRS[1:], [later])
    got = KeysFile(folder).get(PAIRS)
    assert torch.equal(got[PAIRS[1]].keys, later.keys) and torch.equal(got[PAIRS[0]].keys, _keys(3, seed=1).keys)
    assert (folder / "keys.bin").stat().st_size == (3 + 3 + 2) * 4 * 2  # padded to whole rows, then appended


@pytest.fixture(scope="module")
def model(trained):
    return tfm.load(trained["run"] / "best.pt", device="cpu")


def test_a_line_decodes_the_same_with_keys_from_the_files_and_reads_none_itself(model, tmp_path) -> None:
    backend = model.backend
    store = tmp_path / "store"
    computed = backend.example_keys(PAIRS)
    assert all(torch.equal(k.keys, rounded(k.keys)) for k in computed)
    KeysWriter(keys_folder(store, model.sha256), model.sha256).append(PAIRS, computed)
    settings = NearSettings(neighbours=1, temperature=1.0, weight=1.0, reach=1e9, doubt=0.0)
    line = ["Ein mann sieht einen ball !"]
    examples = [[Example(s, t, str(i)) for i, (s, t) in enumerate(PAIRS)]]

    def translated(ahead: str | None):
        backend._example_keys._kept.clear()
        sources = model.encode(line)
        sources.examples, sources.near = examples, NearSettings(**{**settings.__dict__, "ahead": ahead})
        return model.translate_encoded(sources)

    on_demand = translated(None)
    read = backend._example_keys.read
    backend._example_keys.read = lambda pairs: pytest.fail(f"read {pairs} though the files hold them")
    try:
        from_files = translated(str(store))
    finally:
        backend._example_keys.read = read
    assert from_files.translations[0][0].tokens == on_demand.translations[0][0].tokens
    assert from_files.near == on_demand.near == [["0"]]
    assert on_demand.translations[0][0].text == PAIRS[0][1]
