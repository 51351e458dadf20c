"""training/validation.py: what one validation records and logs."""

from __future__ import annotations

import math

from transformer_cli.evaluate import LossResult
from transformer_cli.training.metrics import ValidationRecord
from transformer_cli.training.progress import Progress
from transformer_cli.training.validation import validation_record


def test_the_record_of_an_epoch_end():
    p = Progress(step=40, epoch=2, elapsed_s=65.4321, epoch_train_s=2.0)
    train, valid = LossResult(1.5, math.exp(1.5), 1000), LossResult(2.0, math.exp(2.0), 300)
    r = validation_record(p, True, train, valid, valid_words=200, lr=0.001)
    assert r.to_json() == {
        "epoch": 2,
        "end_of_epoch": True,
        "step": 40,
        "train_loss": 1.5,
        "train_ppl": round(math.exp(1.5), 4),
        "valid_loss": 2.0,
        "valid_ppl": round(math.exp(2.0), 4),
        "valid_word_ppl": round(math.exp(2.0 * 300 / 200), 4),  # per word, not token
        "lr": 0.001,
        "tokens_per_s": 500.0,
        "elapsed_s": 65.43,
    }
    assert ValidationRecord.read(r.to_json()) == r  # as metrics.jsonl and checkpoints hold it
    mid_epoch = validation_record(p, False, train, valid, 200, 0.001)
    assert mid_epoch.epoch == 3 and not mid_epoch.end_of_epoch  # the epoch under way


def test_validation_decodes_with_the_strategy_train_valid_decode_names():
    from transformer_cli.config import Config
    from transformer_cli.training.validation import decode_label, valid_decode_settings

    cfg = Config()
    cfg.decode.beam_size, cfg.decode.strategy = 4, "sample"  # translation's own search is not validation's
    greedy = valid_decode_settings(cfg)
    assert (greedy.strategy, greedy.beam_size, decode_label(greedy)) == ("greedy", 1, "greedy")
    cfg.train.valid_decode = "beam"
    beam = valid_decode_settings(cfg)
    assert (beam.strategy, beam.beam_size, beam.n_best, decode_label(beam)) == ("beam", 4, 1, "beam 4")
