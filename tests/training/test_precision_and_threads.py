"""The fp16 + GradScaler path (run on the CPU) and what validation decoding reports. The
precision choice itself: tests/test_device.py; default threads: test_build.py (`auto`:
tests/test_threads.py)."""

from __future__ import annotations

import json

import pytest
import torch
from training.test_train import make_trainer, small_config

from transformer_cli.training.session import run_training


def test_fp16_trains_with_a_grad_scaler_that_skips_overflowing_steps(tmp_path):
    cfg = small_config(tmp_path, epochs=1, precision="fp16", threads=1)
    trainer = make_trainer(cfg)
    optimization = trainer.optimization
    assert optimization.scaler is not None and optimization.dtype is torch.float16
    groups = list(trainer.data.steps_from(0, 0))
    optimization.net.train()
    # A scale this large turns the fp16 gradients into inf: the step must be skipped.
    optimization.scaler = torch.amp.GradScaler("cpu", init_scale=2.0**120)
    before = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    optimization.step(groups[0])
    assert all(torch.equal(before[k], v) for k, v in trainer.model.state_dict().items())
    assert optimization.scaler.get_scale() < 2.0**120  # backed off
    # With a sane scale the next steps update the weights and the loss falls.
    optimization.scaler = torch.amp.GradScaler("cpu", init_scale=2.0**8)
    for group in groups[1:]:
        optimization.step(group)
    assert not all(torch.equal(before[k], v) for k, v in trainer.model.state_dict().items())
    assert all(torch.isfinite(v).all() for v in trainer.model.state_dict().values())


@pytest.mark.slow
def test_fp16_run_end_to_end_saves_and_resumes_the_scaler(tmp_path):
    cfg = small_config(tmp_path, epochs=2, precision="fp16", threads=1)
    outcome = run_training(cfg)
    records = outcome.progress.history
    assert records[-1].valid_loss < records[0].valid_loss
    from transformer_cli.checkpoint import read_payload

    state = read_payload(cfg.run_dir / "last.pt")["train_state"]
    assert state["grad_scaler"]["scale"] > 0


@pytest.mark.slow
def test_validation_bleu_is_greedy_by_default_and_says_so(tmp_path):
    cfg = small_config(tmp_path, epochs=1, valid_bleu=True, threads=1)
    cfg.decode.beam_size = 4  # the decode section is for translate/evaluate, not validation
    run_training(cfg)
    [record] = [json.loads(x) for x in (cfg.run_dir / "metrics.jsonl").read_text().splitlines()]
    assert record["valid_decode"] == "greedy" and "valid_bleu" in record
    assert "Val. BLEU (greedy):" in (cfg.run_dir / "train.log").read_text()
    beam = small_config(tmp_path / "beam", epochs=1, valid_bleu=True, valid_decode="beam", threads=1)
    beam.decode.beam_size = 3
    run_training(beam)
    [record] = [json.loads(x) for x in (beam.run_dir / "metrics.jsonl").read_text().splitlines()]
    assert record["valid_decode"] == "beam 3"
