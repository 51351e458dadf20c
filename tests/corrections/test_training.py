"""corrections/training.py: the accepted corrections as a part of the training data: the latest
of each source, in acceptance order (a new one appends), mixed in corrections.weight times."""

from __future__ import annotations

import logging
import time

from helpers import write_config

from transformer_cli.config_corrections import CorrectionsConfig
from transformer_cli.config_loading import load_config
from transformer_cli.corrections.guards import guarded
from transformer_cli.corrections.store import Correction, CorrectionStore
from transformer_cli.corrections.training import PART, accepted, corrections_folder, corrections_part, trained_on
from transformer_cli.training.run_data import data_identity, prepare_run_data, training_split


def test_the_accepted_corrections_are_a_part_weighted_in_the_mix(tmp_path, corpus_dir, caplog):
    store = CorrectionStore(tmp_path / "store")
    t = time.time() - 100
    store.add(
        [
            Correction("Ein Hund rennt .", "A dog runs .", caller="a", time=t),
            Correction("Eine Katze schläft .", "A cat sleeps .", caller="b", time=t + 1),
            Correction("Ein Hund rennt .", "A dog is running .", caller="a", time=t + 2),  # replaces the first
            Correction("Ein Haus .", "A house .", status="held", reasons=["x"], time=t + 3),
        ]
    )
    flood = [Correction(f"Satz {i} .", f"Sentence {i} .", client=f"c{i}", caller="flood") for i in range(4)]
    store.add(flood, guarded(CorrectionsConfig(store="s", per_client_per_day=0)))
    assert [c.corrected for c in accepted(store)] == ["A cat sleeps .", "A dog is running ."]
    path = write_config(tmp_path / "small.yaml", tmp_path, corpus_dir, corrections={"store": str(tmp_path / "store")})
    cfg = load_config(str(path))
    with caplog.at_level(logging.INFO, logger="tfm"):
        prepared, _ = prepare_run_data(cfg)
        mixed = training_split(cfg, prepared)
    assert "corrections: 2 accepted from 2 caller(s) (x4 an epoch), 5 held for review" in caplog.text
    capped = "corrections: caller flood reached its daily cap (corrections.per_client_per_day): 4 of its"
    assert capped in caplog.text
    assert prepared.manifest.parts[PART].pairs == 2 and len(mixed) == 300 + 4 * 2
    assert [mixed.lines(i) for i in (300, 301, 302)] == [
        ("Eine Katze schläft .", "A cat sleeps ."),
        ("Ein Hund rennt .", "A dog is running ."),
        ("Eine Katze schläft .", "A cat sleeps ."),
    ]
    heavier = load_config(str(path), ["corrections.weight=8"])
    assert data_identity(heavier, prepared) != data_identity(cfg, prepared)  # another run, nothing encoded
    assert len(training_split(heavier, prepared)) == 300 + 8 * 2
    store.add([Correction("Ein Baum .", "A tree .")])
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="tfm"):
        prepare_run_data(cfg)
    assert f"{PART}: 1 new pairs encoded, 2 kept as they were" in caplog.text


def test_no_store_or_nothing_accepted_is_no_part(tmp_path, corpus_dir):
    cfg = load_config(str(write_config(tmp_path / "small.yaml", tmp_path, corpus_dir)))
    assert corrections_part(cfg) is None
    cfg.corrections.store = str(tmp_path / "empty")
    assert corrections_part(cfg) is None and not corrections_folder(cfg).exists()


def test_data_limit_train_keeps_the_first_corrections_and_says_so(tmp_path, corpus_dir, caplog):
    """As for every source, data.limit_train keeps the first N accepted corrections; the log
    line counts them all and says how many are trained on (it said "2 accepted" of 5)."""
    store = CorrectionStore(tmp_path / "store")
    t = time.time() - 100
    store.add([Correction(f"Satz {i} .", f"Sentence {i} .", caller=f"c{i}", time=t + i) for i in range(5)])
    path = write_config(
        tmp_path / "small.yaml",
        tmp_path,
        corpus_dir,
        corrections={"store": str(tmp_path / "store")},
        data={"limit_train": 2},
    )
    with caplog.at_level(logging.INFO, logger="tfm"):
        part = corrections_part(load_config(str(path)))
    assert part is not None
    assert "corrections: 5 accepted from 5 caller(s), the first 2 trained on (data.limit_train) (x4" in caplog.text
    assert part.paths[1].read_text(encoding="utf-8") == "Sentence 0 .\nSentence 1 .\n"


def test_the_part_says_which_store_and_newest_correction_it_holds_for_the_checkpoints(tmp_path, corpus_dir):
    """What a run's checkpoints record (training.corrections), so that serving leaves those
    corrections to the model: the store, resolved, and the time of the newest in the part."""
    store = CorrectionStore(tmp_path / "store")
    t = time.time() - 100
    store.add([Correction("Ein Hund .", "A dog .", time=t), Correction("Eine Katze .", "A cat .", time=t + 5)])
    path = write_config(tmp_path / "small.yaml", tmp_path, corpus_dir, corrections={"store": str(tmp_path / "store")})
    cfg = load_config(str(path))
    assert trained_on(cfg) is None
    assert corrections_part(cfg) is not None
    assert trained_on(cfg) == {"store": str((tmp_path / "store").resolve()), "until": t + 5}
    store.decide([c.id for c in store.corrections()], "rejected")
    assert corrections_part(cfg) is None and trained_on(cfg) is None  # nothing trained on: no mark


def test_a_log_grown_past_corrections_compact_over_is_compacted_by_the_run_that_reads_it(tmp_path, corpus_dir, caplog):
    """600 corrections then a decision on each: 1,200 lines for 600 records, compacted by the
    next run's data preparation (2.0, the default); the terms log too; 999 lines never."""
    from transformer_cli.corrections.store import TERMS

    store, terms = CorrectionStore(tmp_path / "store"), CorrectionStore(tmp_path / "store", TERMS)
    added = store.add([Correction(f"Satz {i} .", f"Sentence {i} .") for i in range(600)])
    store.decide([c.id for c in added], "rejected")
    small = terms.add([Correction(f"Wort{i}", f"word{i}") for i in range(333)])
    terms.decide([c.id for c in small] * 2, "rejected")  # 999 lines
    path = write_config(tmp_path / "small.yaml", tmp_path, corpus_dir, corrections={"store": str(tmp_path / "store")})
    with caplog.at_level(logging.INFO, logger="tfm"):
        corrections_part(load_config(str(path)))
    assert f"{store.path} compacted: 1200 line(s) -> 600 (corrections.compact_over 2)" in caplog.text
    assert len(store.path.read_bytes().splitlines()) == 600 and len(terms.path.read_bytes().splitlines()) == 999
    assert all(c.status == "rejected" for c in CorrectionStore(tmp_path / "store").corrections())
    off = load_config(str(path), ["corrections.compact_over=null"])
    store.decide([added[0].id] * 1400, "accepted")
    corrections_part(off)
    assert len(store.path.read_bytes().splitlines()) == 2000
