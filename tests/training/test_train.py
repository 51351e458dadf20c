"""Training as `tfm train` does it, end to end: the run it writes, a tiny model that overfits,
early stopping, R-Drop. (Its parts: test_build.py, test_loop.py, test_session.py.)"""

import json
import math

import pytest
import torch
from helpers import sentence_pairs, write_config, write_corpus

from transformer_cli.checkpoint import read_payload
from transformer_cli.config_loading import load_config
from transformer_cli.data.preprocess import prepare
from transformer_cli.inference.translate import TorchTranslator
from transformer_cli.training.build import build_trainer
from transformer_cli.training.distributed import DistContext
from transformer_cli.training.loop import Trainer
from transformer_cli.training.run_dir import RunDir
from transformer_cli.training.session import run_training
from transformer_cli.training.signals import GracefulStop


def test_train_cli_writes_a_complete_run(trained):
    run = trained["run"]
    for name in (
        "config.yaml",
        "manifest.json",
        "train.log",
        "metrics.jsonl",
        "best.pt",
        "last.pt",
        "published.pt",
        "promotions.log",
        "curves.png",
    ):
        assert (run / name).is_file(), name
    records = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in records] == list(range(1, 11))
    for key in (
        "epoch",
        "step",
        "train_loss",
        "train_ppl",
        "valid_loss",
        "valid_ppl",
        "valid_word_ppl",
        "lr",
        "tokens_per_s",
        "elapsed_s",
    ):
        assert key in records[0]
    assert records[-1]["valid_word_ppl"] > records[-1]["valid_ppl"]  # subwords: more tokens than words
    assert math.isclose(records[-1]["valid_ppl"], math.exp(records[-1]["valid_loss"]), rel_tol=1e-3)
    assert records[-1]["valid_loss"] < records[0]["valid_loss"] / 5
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["seed"] == 1234 and manifest["versions"]["torch"] and manifest["data_files"]
    assert (run / "curves.png").read_bytes()[:4] == b"\x89PNG"
    assert "Epoch: 10 | Time: " in (run / "train.log").read_text()
    assert "| Train Loss: " in trained["stderr"] and "| Val. PPL: " in trained["stderr"]
    # checkpoints are plain data: weights_only loading works, and carry everything to translate
    for name in ("best.pt", "last.pt", "published.pt"):
        payload = torch.load(run / name, weights_only=True)
        assert {"model", "state_dict", "tokenizer", "config", "sha256"} <= set(payload)
    assert "train_state" in read_payload(run / "last.pt")


def small_config(tmp_path, pairs: int = 200, **train):
    corpus = write_corpus(tmp_path / "corpus", {"train": pairs, "val": 30, "test_2016_flickr": 10})
    path = write_config(
        tmp_path / "run.yaml",
        tmp_path,
        corpus,
        model={"d_model": 64, "n_heads": 4, "d_ff": 128, "dropout": 0.1},
        train={"epochs": 3, "batch_size": 16, "lr": 2e-3, **train},
    )
    return load_config(str(path))


def make_trainer(cfg) -> Trainer:
    """A Trainer on `cfg`'s prepared data, on the CPU, in one process (not started)."""
    prepared, _ = prepare(cfg)
    run = RunDir(cfg.run_dir)
    run.create()
    return build_trainer(cfg, prepared, run, torch.device("cpu"), DistContext(), GracefulStop(), False)


@pytest.mark.slow
def test_tiny_model_overfits_a_handful_of_pairs(tmp_path):
    cfg = small_config(tmp_path, pairs=8, epochs=30, batch_size=8, lr=1e-2)
    cfg.model.dropout = 0.0
    cfg.data.min_train_pairs = 8  # deliberately tiny: overfitting is the point
    run_training(cfg)
    prepared, _ = prepare(cfg)
    translator = TorchTranslator.from_checkpoint(cfg.run_dir / "best.pt", torch.device("cpu"))
    pairs = sentence_pairs(8, seed=0)
    outputs = [t[0].text for t in translator.translate([de for de, _ in pairs]).translations]
    assert outputs == [en for _, en in pairs]


@pytest.mark.slow
def test_early_stopping(tmp_path):
    cfg = small_config(tmp_path, epochs=30, patience=1, lr=0.5, clip_norm=None)  # diverges
    outcome = run_training(cfg)
    assert outcome.progress.stop_reason == "early_stopping" and outcome.progress.epoch < 30


@pytest.mark.slow
def test_tiny_model_trains_with_r_drop(tmp_path):
    cfg = small_config(tmp_path, criterion_options={"rdrop_alpha": 1.0})
    run_training(cfg)
    records = RunDir(cfg.run_dir).read_metrics()
    assert len(records) == 3 and records[-1].valid_loss < records[0].valid_loss
    assert all(math.isfinite(r.train_loss) for r in records)
