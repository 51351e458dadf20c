"""synthetic/lineage.py: a model replaced at the same path (a re-published teacher) keeps the
earlier translations of the lines it had, refreshing one share of them per version, and
translates the new lines; `retranslate`, or a new version better on validation by the
margin, translates every line again. One log line says which."""

from __future__ import annotations

import json
import logging

import pytest
import torch
from helpers import sentence_pairs, untrained_checkpoint, write_config, write_corpus

from transformer_cli.checkpoint import Checkpoint
from transformer_cli.config_loading import load_config
from transformer_cli.errors import TfmError
from transformer_cli.synthetic.cache import TranslationCache
from transformer_cli.synthetic.lineage import chained
from transformer_cli.synthetic.mixture import STATE, synthesize, synthetic_folder
from transformer_cli.synthetic.text import line_key

SHORT = ["decode.max_len_b=4", "decode.max_len_a=0"]


@pytest.fixture
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def publish(path, seed: int, bleu: float | None = None):
    """An untrained model at `path`, its weights drawn by `seed`, recording `bleu`."""
    untrained_checkpoint(path)
    checkpoint = Checkpoint.read(path)
    generator = torch.Generator().manual_seed(seed)
    checkpoint.weights = {k: torch.randn(v.shape, generator=generator) * 0.5 for k, v in checkpoint.weights.items()}
    checkpoint.metrics = {} if bleu is None else {"valid_bleu": bleu}
    checkpoint.write(path)


def setup(tmp_path, **synthetic):
    corpus = write_corpus(tmp_path / "corpus", {"train": 20, "val": 5, "test_2016_flickr": 5}, gz=False)
    german = tmp_path / "text.de"
    german.write_text("".join(f"{de} ({i})\n" for i, (de, _) in enumerate(sentence_pairs(12, seed=8))))
    section = {
        "forward_translation": {"text": [str(german)], "teachers": [str(tmp_path / "published.pt")], "beam_size": 1},
        "cache_dir": str(tmp_path / "cache"),
        **synthetic,
    }
    path = write_config(tmp_path / "ft.yaml", tmp_path, corpus, train={"threads": 1}, synthetic=section)
    return german, path


def translations(cfg) -> dict[int, str]:
    """The corpus's synthetic targets by their source line's key."""
    folder = synthetic_folder(cfg)
    text = (folder / "forward_translation.text").read_text().splitlines()
    targets = (folder / "forward_translation.en").read_text().splitlines()
    return {line_key(s): t for s, t in zip(text, targets)}


def cache_of(tmp_path, digest) -> dict[int, str]:
    (folder,) = [f for f in (tmp_path / "cache").glob("forward-*") if digest in (f / "cache.json").read_text()]
    state = json.loads((folder / "cache.json").read_text())
    cache = TranslationCache(folder, state["identity"])
    return dict(zip(cache.keys.tolist(), cache.translations(cache.keys)))


def test_a_replaced_teacher_keeps_earlier_lines_refreshes_a_share_and_translates_new_ones(tmp_path, one_thread, caplog):
    german, path = setup(tmp_path, refresh_share=0.5)
    publish(tmp_path / "published.pt", seed=1)
    cfg = load_config(str(path), SHORT)
    synthesize(cfg)
    first = Checkpoint.read(tmp_path / "published.pt").digest
    with open(german, "a") as f:
        f.write("Ein Hund rennt über die Wiese.\nZwei Kinder spielen im Schnee.\n")
    publish(tmp_path / "published.pt", seed=2)  # re-published at the same path
    second = Checkpoint.read(tmp_path / "published.pt").digest
    with caplog.at_level(logging.INFO, logger="tfm"):
        synthesize(cfg)
    old, new = cache_of(tmp_path, first), cache_of(tmp_path, second)
    refreshed = [k for k in old if k % 2 == 1]  # version 2 of 2 buckets: the odd keys
    assert len(old) == 12 and set(new) == {
        *refreshed,
        line_key("Ein Hund rennt über die Wiese."),
        line_key("Zwei Kinder spielen im Schnee."),
    }
    assert (
        f"was replaced (version 2 of these models and search; no validation BLEU recorded to compare): "
        f"earlier translations kept for {12 - len(refreshed)} lines, {len(refreshed)} refreshed "
        "(synthetic.refresh_share=0.5), 2 new"
    ) in caplog.text
    corpus = translations(cfg)
    assert corpus == {k: new.get(k, old.get(k)) for k in corpus}  # the newest version's, else the earlier
    state = json.loads((synthetic_folder(cfg) / STATE).read_text())
    assert state["translated"]["forward_translation"]["lines"] == len(refreshed) + 2
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="tfm"):
        synthesize(cfg)  # the next night, nothing new: nothing translated, nothing to say
    assert "was replaced" not in caplog.text and translations(cfg) == corpus


@pytest.mark.parametrize("why", ["retranslate", "improved"])
def test_every_line_again_when_asked_or_when_the_new_version_is_better_by_the_margin(tmp_path, one_thread, why):
    german, path = setup(tmp_path, republished="retranslate" if why == "retranslate" else "keep")
    publish(tmp_path / "published.pt", seed=1, bleu=30.0)
    cfg = load_config(str(path), SHORT)
    synthesize(cfg)
    publish(tmp_path / "published.pt", seed=2, bleu=31.5 if why == "improved" else 30.2)
    synthesize(cfg)
    second = Checkpoint.read(tmp_path / "published.pt").digest
    assert len(cache_of(tmp_path, second)) == 12
    assert translations(cfg) == cache_of(tmp_path, second)


def test_each_line_is_read_from_the_newest_version_that_has_it(tmp_path):
    import numpy as np

    newer, older = TranslationCache(tmp_path / "new", {"v": 2}), TranslationCache(tmp_path / "old", {"v": 1})
    older.append(np.array([1, 2, 3], dtype=np.uint64), ["one (old)", "two (old)", "three (old)"])
    newer.append(np.array([2, 4], dtype=np.uint64), ["two (new)", "four (new)"])
    keys = np.array([4, 3, 2, 1], dtype=np.uint64)
    assert list(chained([newer, older], keys)) == ["four (new)", "three (old)", "two (new)", "one (old)"]
    with pytest.raises(TfmError, match="lines missing from the translation caches"):
        list(chained([newer, older], np.array([5], dtype=np.uint64)))


def test_a_night_opens_only_the_versions_that_can_still_hold_a_lines_newest_translation(tmp_path, one_thread):
    """With refresh_share 0.5 two versions in a row refresh every line: the fourth version reads
    the second's and third's caches and never opens the first's (damaged here: opening it fails)."""
    _, path = setup(tmp_path, refresh_share=0.5)
    cfg = load_config(str(path), SHORT)
    digests = []
    for seed in (1, 2, 3):
        publish(tmp_path / "published.pt", seed=seed)
        digests.append(Checkpoint.read(tmp_path / "published.pt").digest)
        synthesize(cfg)
    (first,) = [f for f in (tmp_path / "cache").glob("forward-*") if digests[0] in (f / "cache.json").read_text()]
    state = json.loads((first / "cache.json").read_text())
    (first / "cache.json").write_text(json.dumps({**state, "rows": -1}))
    publish(tmp_path / "published.pt", seed=4)
    synthesize(cfg)
    latest = cache_of(tmp_path, Checkpoint.read(tmp_path / "published.pt").digest)
    assert 0 < len(latest) < 12  # a bucket refreshed, the rest read from versions 2 and 3
    second, third, corpus = cache_of(tmp_path, digests[1]), cache_of(tmp_path, digests[2]), translations(cfg)
    assert len(corpus) == 12 and corpus == {k: latest.get(k, third.get(k, second.get(k))) for k in corpus}
