"""training/metrics.py: ValidationRecord, one validation's figures: read leniently from plain
data (None for what holds none), written without its unset fields, the notebook's log line,
metrics.jsonl both ways, a checkpoint's metrics in a few words, and perplexity per word."""

from __future__ import annotations

import dataclasses
import math

from transformer_cli.training.metrics import ValidationRecord, described, read_jsonl, word_perplexity, write_jsonl

RECORD = ValidationRecord(
    epoch=2,
    end_of_epoch=True,
    step=40,
    train_loss=1.5,
    train_ppl=4.4817,
    valid_loss=2.0,
    valid_ppl=7.3891,
    lr=1e-3,
    tokens_per_s=500.4,
    elapsed_s=65.43,
)


def test_log_lines_keep_their_format():
    r = RECORD
    assert r.line(improved=True) == (
        "Epoch: 02 | Time: 1m 05s | Train Loss: 1.500 | Train PPL:   4.482 | Val. Loss: 2.000 | "
        "Val. PPL:   7.389 | 500 tok/s *"
    )
    step = dataclasses.replace(r, end_of_epoch=False, valid_bleu=12.345, valid_decode="beam 4")
    assert step.line(improved=False) == (
        "Step: 40 | Time: 1m 05s | Train Loss: 1.500 | Train PPL:   4.482 | Val. Loss: 2.000 | "
        "Val. PPL:   7.389 | Val. BLEU (beam 4): 12.35 | 500 tok/s"
    )


def test_a_malformed_or_foreign_record_reads_as_none():
    assert ValidationRecord.read({"epoch": "two"}) is None
    assert ValidationRecord.read({}) is None  # a model imported from elsewhere has no metrics


def test_metrics_jsonl_holds_a_record_a_line_and_skips_what_is_none():
    bleu = dataclasses.replace(RECORD, step=50, valid_bleu=12.5, valid_decode="greedy")
    text = write_jsonl([RECORD, bleu])
    assert text.count("\n") == 2 and "valid_bleu" not in text.splitlines()[0]  # unset fields left out
    assert read_jsonl(text + "\n" + '{"note": "not a record"}\n') == [RECORD, bleu]


def test_a_checkpoints_metrics_in_a_few_words():
    assert described(RECORD.to_json()) == "epoch 2, step 40, valid_loss 2.0"
    assert described({"valid_bleu": 30.1, "other": 1}) == "valid_bleu 30.1"
    assert described({}) == "no metrics"


def test_perplexity_per_word_counts_the_tokens_of_the_words():
    assert word_perplexity(2.0, 300, 200) == math.exp(3.0)
    assert word_perplexity(2.0, 200, 200) == math.exp(2.0)
    assert word_perplexity(100.0, 300, 1) == math.exp(50.0)  # bounded: no overflow
