"""training/replay.py: a replay night trains on the pairs the published model's data did not
hold (appended, from a replaced file, new corrections), each pass beside a fresh sample of the
held ones, so its length follows what changed; every run under night: replay keeps its seen set."""

from __future__ import annotations

import json
import logging
import random
import re
import time
from pathlib import Path

import numpy as np
import pytest
from helpers import run_tfm, sentence_pairs, write_config, write_corpus

from transformer_cli.checkpoint import Checkpoint
from transformer_cli.config_loading import load_config
from transformer_cli.config_retrain import RetrainConfig
from transformer_cli.corrections.store import Correction, CorrectionStore
from transformer_cli.data.augment import Augmentation
from transformer_cli.data.loader import TrainingData
from transformer_cli.data.mixed import MixedSplit, Source
from transformer_cli.data.preprocess import prepare
from transformer_cli.training.replay import SEEN, Seen, night_of, parts_of, split_hashes, start_night

MODEL = {"d_model": 32, "n_heads": 4, "d_ff": 64}


def test_new_and_held_pairs_are_told_by_their_text_and_a_pass_draws_the_held_afresh(tmp_path, corpus_dir):
    cfg = load_config(str(write_config(tmp_path / "r.yaml", tmp_path, corpus_dir)))
    prepared, _ = prepare(cfg)
    real = prepared.split("train")
    hashes = split_hashes(real)
    assert len(hashes) == len(real) and len(np.unique(hashes)) == len(set(map(real.lines, range(len(real)))))
    parent = Seen.of([hashes[:-6]])  # the parent's data lacked the last 6 pairs
    mix = MixedSplit([Source("train", real, 2)])  # the real pairs twice: every copy of a new pair
    night = night_of(parts_of(mix), {"train": hashes}, parent, ratio=0.5)
    n, fresh = len(real), [i for i in range(len(real)) if hashes[i] not in set(hashes[:-6].tolist())]
    assert 0 < len(fresh) <= 6 and min(fresh) >= n - 6  # (a repeated pair among the last 6 was held)
    k = len(fresh)
    assert night.new_pairs == {"train": k} and night.new.tolist() == [*fresh, *(n + i for i in fresh)]
    assert len(night.held) == 2 * (n - k) and night.replayed == k
    first, again, second = night.epoch_indices(1, 0), night.epoch_indices(1, 0), night.epoch_indices(1, 1)
    assert first.tolist() == again.tolist() and len(first) == 3 * k and first[: 2 * k].tolist() == night.new.tolist()
    assert set(first[2 * k :]) <= set(night.held.tolist()) and first[2 * k :].tolist() != second[2 * k :].tolist()
    assert f"{k} new pairs (train {k}; {2 * k} a pass with their weights), {k} of the" in night.describe()


def test_held_out_pairs_are_in_no_batch_of_the_night_nor_in_its_seen_set(tmp_path, corpus_dir, caplog):
    """A parent that held the first 200 pairs: of the new ones, a fifth are held out, in no batch
    of any pass; the run's seen set leaves them out, so the night after it counts them new."""
    caplog.set_level(logging.INFO, logger="tfm")
    train = {"epochs": 3, "batch_size": 16, "data_workers": 0}
    cfg = load_config(str(write_config(tmp_path / "r.yaml", tmp_path, corpus_dir, train=train)))
    prepared, _ = prepare(cfg)
    real = prepared.split("train")
    hashes = split_hashes(real)
    parent = Seen.of([hashes[:200]])
    data = TrainingData(cfg, real, Augmentation.from_config(cfg, prepared.tokenizers))
    own, held = start_night(data, tmp_path / "run", parent, RetrainConfig(night="replay", held_out_share=0.2), True)
    new, kept_out = set(hashes.tolist()) - set(parent.hashes.tolist()), set(held.hashes.tolist())
    assert len(kept_out) == len(new) // 5 >= 10 and kept_out <= new
    trained = {
        int(hashes[i]) for e in range(3) for s in range(data.steps(e)) for b in data.step_indices(e, s) for i in b
    }
    assert not trained & kept_out and new - kept_out <= trained
    assert set(own.hashes.tolist()) == set(hashes.tolist()) - kept_out and (tmp_path / "run" / SEEN).is_dir()
    said = f"; {len(kept_out)} held out for the gate, not trained tonight (0.2 of {len(new)} distinct new pairs of"
    assert any(r.getMessage().startswith("replay night: ") and said in r.getMessage() for r in caplog.records)
    after = night_of(parts_of(real), {"train": hashes}, own, ratio=1.0)
    assert {int(hashes[i]) for i in after.new} == kept_out  # the next night trains them


def test_a_seen_set_is_read_back_by_its_sha256_and_a_damaged_one_is_none(tmp_path):
    seen = Seen.of([np.array([5, 3, 3], dtype=np.uint64), np.array([9], dtype=np.uint64)])
    assert seen.hashes.tolist() == [3, 5, 9]
    path = seen.write(tmp_path)
    assert Seen.read(tmp_path, seen.sha256).hashes.tolist() == [3, 5, 9]
    path.write_bytes(path.read_bytes()[:-8])
    assert Seen.read(tmp_path, seen.sha256) is None and Seen.read(tmp_path, "0" * 64) is None


def replay_config(work: Path, corpus: Path, **retrain) -> Path:
    return write_config(
        work / "nightly.yaml",
        work,
        corpus,
        model=MODEL,
        corrections={"store": str(work / "store")},
        train={
            "epochs": 3,
            "batch_size": 16,
            "lr": 3e-3,
            "threads": 1,
            "init_from": "published",
            "continued": {"lr": 1e-3},
            "retrain": {"night": "replay", "replay_epochs": 2, "replay_ratio": 1.0, "max_growth": None, **retrain},
        },
    )


def night(cfg: Path) -> str:
    """One nightly run; its part of train.log."""
    r = run_tfm("train", "-c", str(cfg), "--quiet")
    assert r.returncode == 0, r.stderr
    return (cfg.parent / "checkpoints" / "nightly" / "train.log").read_text().split("tfm train -c")[-1]


@pytest.mark.slow
def test_replay_nights_train_on_what_changed_and_keep_their_seen_sets(tmp_path):
    corpus = write_corpus(tmp_path / "corpus", {"train": 300, "val": 30, "test_2016_flickr": 10}, gz=False)
    cfg = replay_config(tmp_path, corpus)
    run = tmp_path / "checkpoints" / "nightly"
    first = night(cfg)
    assert "training from scratch" in first and "replay night" not in first
    parent = Checkpoint.read(run / "published.pt")
    assert (run / SEEN / f"{parent.training['seen_sha256']}.u64").is_file()

    # 30 pairs appended (those the corpus lacked are new) and 2 corrections accepted (x4 a pass).
    extra = sentence_pairs(30, seed=11)
    held = set(zip(*((corpus / f"train.{lang}").read_text(encoding="utf-8").splitlines() for lang in ("de", "en"))))
    k = sum(p not in held for p in extra)
    for lang, side in (("de", 0), ("en", 1)):
        with open(corpus / f"train.{lang}", "a", encoding="utf-8") as f:
            f.write("".join(f"{p[side]}\n" for p in extra))
    CorrectionStore(tmp_path / "store").add(
        [Correction("Ein Hund rennt .", "A dog runs .", time=time.time()), Correction("Eine Katze .", "A cat .")]
    )
    second = night(cfg)
    said = f"replay night: {k + 2} new pairs (train {k}, corrections 2; {k + 8} a pass with their weights), {k + 8} of"
    assert said in second and "continuing 2 passes over the new pairs (night: replay" in second
    (steps,) = re.findall(r"2 passes of (\d+) steps?", second)
    assert int(steps) <= -(-2 * (k + 8) // 16) + 2  # the pass's pairs at 16 a batch, not the corpus's 330
    child = Checkpoint.read(run / "best.pt")
    assert child.training["retrain"]["replay"] and child.training["seen_sha256"] != parent.training["seen_sha256"]

    # The corpus file replaced by a shuffled copy with 5 lines changed: those 5 alone are new.
    for lang in ("de", "en"):
        lines = (corpus / f"train.{lang}").read_text(encoding="utf-8").splitlines()
        random.Random(3).shuffle(lines)
        lines[:5] = [f"{line} neu" if lang == "de" else f"{line} new" for line in lines[:5]]
        (corpus / f"train.{lang}").write_text("".join(f"{x}\n" for x in lines), encoding="utf-8")
    third = night(cfg)
    assert "replay night: 5 new pairs (train 5; 5 a pass with their weights), 5 of the " in third


@pytest.mark.slow
def test_a_replay_night_holds_out_new_pairs_and_its_promotion_line_names_their_losses(tmp_path):
    corpus = write_corpus(tmp_path / "corpus", {"train": 300, "val": 30, "test_2016_flickr": 10}, gz=False)
    cfg = replay_config(tmp_path, corpus, held_out_share=0.2)
    run = tmp_path / "checkpoints" / "nightly"
    assert "held out" not in night(cfg)  # from scratch: every pair
    extra = sentence_pairs(200, seed=12)
    for lang, side in (("de", 0), ("en", 1)):
        with open(corpus / f"train.{lang}", "a", encoding="utf-8") as f:
            f.write("".join(f"{p[side]}\n" for p in extra))
    pairs = set(zip(*((corpus / f"train.{lang}").read_text(encoding="utf-8").splitlines() for lang in ("de", "en"))))
    log = night(cfg)
    (held, new) = map(
        int, re.findall(r"; (\d+) held out for the gate, not trained tonight \(0.2 of (\d+) distinct", log)[0]
    )
    assert held == new // 5 >= 10
    (line,) = [x for x in log.splitlines() if "promotion: " in x]
    losses = rf"held-out new pairs \({held}\): loss [\d.]+ against|on the {held} held out, its loss [\d.]+ is above"
    assert re.search(losses, line), line
    entry = json.loads((run / "promotions.log").read_text().splitlines()[-1])
    assert entry["held_out"]["pairs"] == held and entry["rules"]["tolerance_held_out"] == 0.05
    child = Checkpoint.read(run / "best.pt")
    assert child.training["held_out"]["pairs"] == held and child.training["held_out"]["new_pairs"] == new
    seen = Seen.read(run / SEEN, child.training["seen_sha256"])
    assert seen is not None and len(seen.hashes) == len(pairs) - held  # the next night counts them new
