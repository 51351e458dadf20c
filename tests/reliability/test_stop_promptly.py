"""SIGTERM is honoured within seconds wherever it lands: validation decoding, preprocessing.

A service manager sends SIGKILL 10-30 s after SIGTERM (`docker stop`: 10 s, Kubernetes: 30 s);
tfm used to finish a whole validation translation first (2 min 46 s on base.yaml). Real processes,
real signals.
"""

from __future__ import annotations

import signal
import time

import pytest
from helpers import write_corpus
from reliability.cron_helpers import Tfm, epoch_ends, file_contains, run_dir, wait_until, write_cron_config

pytestmark = pytest.mark.slow  # real tfm processes on their own corpora
GRACE_S = 10  # the shortest common wait before SIGKILL; stopping itself takes a few seconds


def test_sigterm_during_validation_decoding_exits_143_within_the_grace_and_resumes(tmp_path):
    # 600 validation sentences, 4 per batch, decoded by a barely trained model that runs to the
    # length limit: validation BLEU takes far longer than the grace allowed for stopping.
    corpus = write_corpus(tmp_path / "corpus", {"train": 300, "val": 600, "test_2016_flickr": 20})
    paths = {"corpus": corpus, "data": tmp_path / "data", "cache": tmp_path / "cache"}
    cfg = write_cron_config(tmp_path, paths, epochs=1, valid_bleu=True)
    cfg.write_text(
        cfg.read_text()
        .replace("max_len_b: 12", "max_len_b: 60")
        .replace("beam_size: 1", "beam_size: 1\n  batch_size: 4")
    )
    run = run_dir(cfg)
    tfm = Tfm("train", "-c", str(cfg), log_to=tmp_path / "first.err")
    wait_until(
        file_contains(run / "train.log", "validation BLEU: translating 600 sentences (greedy)"),
        timeout=120,
        what="validation decoding",
        alive=tfm,
    )
    sent = time.monotonic()
    tfm.kill(signal.SIGTERM)
    code = tfm.wait(60)
    waited = time.monotonic() - sent
    assert code == 143, tfm.stderr
    assert waited < GRACE_S, f"exited {waited:.1f} s after SIGTERM"
    assert "stopped by signal 15; state saved" in tfm.stderr
    assert not (run / "metrics.jsonl").exists() or epoch_ends(run) == []  # validation abandoned

    # the redone validation as short as it may be: decoding settings may change on resume
    again = Tfm("train", "-c", str(cfg), "--set", "decode.max_len_b=12", log_to=tmp_path / "second.err")
    assert again.wait(300) == 0, again.stderr
    assert "resuming at epoch 2, step 10" in again.stderr  # after epoch 1's 10 steps ...
    assert "validation BLEU: translating 600" in again.stderr  # ... whose validation is redone
    [(step, _, _)] = epoch_ends(run)
    assert step == 10 and (run / "published.pt").is_file()


def test_sigterm_during_preprocessing_leaves_no_work_folder(tmp_path):
    corpus = write_corpus(tmp_path / "corpus", {"train": 30000, "val": 50, "test_2016_flickr": 50})
    paths = {"corpus": corpus, "data": tmp_path / "data", "cache": tmp_path / "cache"}
    cfg = write_cron_config(tmp_path, paths, epochs=1)
    cfg.write_text(
        cfg.read_text()
        .replace("kind: sentencepiece", "kind: spacy")
        .replace("share_embeddings: true", "share_embeddings: false")
    )
    tfm = Tfm("train", "-c", str(cfg), log_to=tmp_path / "err")
    wait_until(file_contains(run_dir(cfg) / "train.log", "source:"), timeout=120, what="preprocessing", alive=tfm)
    time.sleep(0.5)
    sent = time.monotonic()
    tfm.kill(signal.SIGTERM)
    assert tfm.wait(60) == 143, tfm.stderr
    assert time.monotonic() - sent < GRACE_S
    assert "stopped by signal 15 while preparing the data" in tfm.stderr
    leftovers = [p for p in paths["data"].glob(".*") if p.name != ".cron.lock"] if paths["data"].exists() else []
    assert leftovers == [] and not (paths["data"] / "cron").exists()
