"""training/held_out.py: a replay night holds out a small share of its new pairs of the corpus
and the corrections, chosen by a hash of each pair's text keyed with the parent's seen set: the
same pairs whatever the order of the files, floor(share x new) of them up to a cap, none when
that is fewer than MIN_PAIRS."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
from helpers import sentence_pairs, write_config

from transformer_cli.config_loading import load_config
from transformer_cli.data.preprocess import prepare
from transformer_cli.training.held_out import MIN_PAIRS, chosen, hold_out
from transformer_cli.training.replay import Seen, split_hashes

SALT = "ab" * 32  # a seen set's sha256


def test_the_choice_is_a_function_of_the_hashes_their_share_and_the_parent_alone():
    new = np.random.default_rng(0).integers(0, 2**63, 400, dtype=np.uint64)
    held = chosen(new, SALT, 0.05, 1000)
    assert len(held) == 20 and set(held.tolist()) <= set(new.tolist()) and held.tolist() == sorted(held.tolist())
    shuffled = np.random.default_rng(1).permutation(np.concatenate([new, new[:50]]))  # repeats count once
    assert chosen(shuffled, SALT, 0.05, 1000).tolist() == held.tolist()
    capped = chosen(new, SALT, 0.05, 12)  # the cap keeps those of the smallest keys
    assert len(capped) == 12 and set(capped.tolist()) <= set(held.tolist())
    assert set(chosen(new, "cd" * 32, 0.05, 1000).tolist()) != set(held.tolist())  # another parent, another draw
    assert len(chosen(new[: 20 * MIN_PAIRS - 1], SALT, 0.05, 1000)) == 0  # 9.95 pairs: too few
    assert len(chosen(new[: 20 * MIN_PAIRS], SALT, 0.05, 1000)) == MIN_PAIRS
    assert len(chosen(new, SALT, 0.0, 1000)) == 0


def _corpus(folder: Path, pairs: list[tuple[str, str]]) -> Path:
    folder.mkdir(parents=True)
    splits = {"train": pairs, "val": sentence_pairs(20, seed=1), "test_2016_flickr": sentence_pairs(10, seed=2)}
    for split, rows in splits.items():
        for lang, side in (("de", 0), ("en", 1)):
            (folder / f"{split}.{lang}").write_text("".join(f"{r[side]}\n" for r in rows), encoding="utf-8")
    return folder


def test_the_same_pairs_are_held_out_whatever_the_order_of_the_corpus(tmp_path):
    """Two corpora of the same pairs in other orders, against a parent that held the first 150:
    the same held-out pairs, each with its own text, in the order of their hashes."""
    pairs = list(dict.fromkeys(sentence_pairs(400, seed=7)))
    shuffled = random.Random(3).sample(pairs, len(pairs))
    results, first = [], set(pairs[:150])
    for name, rows in (("ordered", pairs), ("shuffled", shuffled)):
        cfg = load_config(
            str(write_config(tmp_path / name / "c.yaml", tmp_path / name, _corpus(tmp_path / f"{name}-corpus", rows)))
        )
        real = prepare(cfg)[0].split("train")
        hashes = split_hashes(real)
        parent = Seen.of([hashes[[real.lines(i) in first for i in range(len(real))]]])
        results.append(hold_out({"train": real}, {"train": hashes}, parent.hashes, SALT, 0.1, 1000))
    ordered, again = results
    new = len(pairs) - 150
    assert ordered.new == again.new == new and len(ordered) == new // 10
    assert ordered.hashes.tolist() == again.hashes.tolist()
    assert ordered.sources == again.sources and ordered.targets == again.targets
    assert set(zip(ordered.sources, ordered.targets)) <= set(pairs[150:])
    assert ordered.record()["pairs"] == new // 10 and ordered.record()["sha256"] == again.record()["sha256"]
    said = f"{new // 10} held out for the gate, not trained tonight (0.1 of {new} distinct new pairs of the corpus"
    assert ordered.describe() == f"{said} and the corrections)"
    few = hold_out({"train": real}, {"train": hashes}, parent.hashes, SALT, 0.02, 1000)
    assert len(few) == 0 and few.describe() == (
        f"none held out for the gate (0.02 of {new} distinct new pairs of the corpus and the corrections is fewer "
        f"than {MIN_PAIRS})"
    )
    # Synthetic pairs (a model's translations) are never held out.
    assert len(hold_out({"back_translation": real}, {"back_translation": hashes}, parent.hashes, SALT, 0.1, 99)) == 0
