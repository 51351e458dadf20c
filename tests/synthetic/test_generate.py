"""synthetic/generate.py: what a cache lacks is translated a chunk at a time, in text order,
post-processed, and appended: a run that resumes after some chunks ends with the cache of a
run never stopped, and a sampled search draws with a seed of the chunk's first line."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from helpers import sentence_pairs, untrained_checkpoint

from transformer_cli.checkpoint import Checkpoint
from transformer_cli.config import DecodeConfig
from transformer_cli.inference.translate import TorchTranslator
from transformer_cli.synthetic.cache import TranslationCache
from transformer_cli.synthetic.corpora import TextFile
from transformer_cli.synthetic.generate import RowReader, chunk_seed, translate_missing
from transformer_cli.synthetic.text import clean_text

LINES = [de for de, _ in sentence_pairs(24, seed=3)]
GREEDY = DecodeConfig(beam_size=1, max_len_a=0.0, max_len_b=6, batch_size=16)


@pytest.fixture(scope="module")
def backend(tmp_path_factory):
    path = untrained_checkpoint(tmp_path_factory.mktemp("generate") / "m.pt")
    return TorchTranslator.load(Checkpoint.read(path), torch.device("cpu"), GREEDY)


@pytest.fixture
def text(tmp_path):
    (tmp_path / "text.de").write_text("".join(f"{x}\n" for x in LINES))
    return clean_text([TextFile(tmp_path / "text.de", "")], tmp_path / "clean.txt", set(), 50, None)


def files(folder) -> dict[str, bytes]:
    return {name: (folder / name).read_bytes() for name in ("keys.u64", "ends.u64", "lines.txt")}


def test_a_resumed_run_ends_with_the_cache_of_one_never_stopped(tmp_path, text, backend):
    straight = TranslationCache(tmp_path / "straight", {})
    done = translate_missing(text, straight, backend, GREEDY, 8, 1, "test")
    assert done.lines == len(text.keys) == straight.rows and done.seconds > 0
    expected = [hyps[0].text for hyps in backend.translate(_kept(text), GREEDY).translations]
    assert list(straight.translations(text.keys)) == [" ".join(t.split()) for t in expected]

    resumed = TranslationCache(tmp_path / "resumed", {})
    first = text.keys[:8]  # the first chunk only, as a run killed after it
    resumed.append(first, list(straight.translations(first)))
    calls: list[int] = []
    done = translate_missing(text, resumed, backend, GREEDY, 8, 1, "test", check_stop=lambda: calls.append(1))
    assert done.lines == len(text.keys) - 8 and len(calls) >= 2  # stops checked (each chunk, each batch)
    assert files(tmp_path / "resumed") == files(tmp_path / "straight")
    assert translate_missing(text, resumed, backend, GREEDY, 8, 1, "test").lines == 0  # nothing left


def test_translations_are_post_processed_with_the_seed(tmp_path, text, backend):
    cache = TranslationCache(tmp_path / "c", {})
    translate_missing(text, cache, backend, GREEDY, 100, 7, "test", post=lambda line, seed: f"{seed}|{line}")
    assert all(t.startswith("7|") for t in cache.translations(text.keys))


def test_each_chunk_has_its_own_seed():
    assert chunk_seed(1, 12345) == chunk_seed(1, 12345) != chunk_seed(1, 12346)
    assert chunk_seed(1, 5) != chunk_seed(2, 5) and 0 <= chunk_seed(2**40, 2**64 - 1) < 2**31


def _kept(text) -> list[str]:
    return text.path.read_text().splitlines()


def test_lines_are_read_by_row_forward_and_again_from_the_start(tmp_path):
    (tmp_path / "t.txt").write_text("".join(f"line {i}\n" for i in range(10)))
    reader = RowReader(clean_text([TextFile(tmp_path / "t.txt", "")], tmp_path / "clean.txt", set(), 50, None))
    assert reader.at(np.array([0, 3])) == ["line 0", "line 3"]
    assert reader.at(np.array([4, 9])) == ["line 4", "line 9"]
    assert reader.at(np.array([1])) == ["line 1"]  # before the last row read: read again
