"""Data-parallel training with 2 CPU processes (gloo), started by torchrun as a user would."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import run_tfm, write_config

TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
pytestmark = pytest.mark.slow  # two processes train


def test_two_processes_stay_in_sync(tmp_path, corpus_dir):
    cfg = write_config(tmp_path / "ddp.yaml", tmp_path, corpus_dir, train={"epochs": 2, "batch_size": 16})
    assert run_tfm("preprocess", "-c", str(cfg), "-q").returncode == 0
    worker = Path(__file__).with_name("ddp_worker.py")
    r = subprocess.run([*TORCHRUN, str(worker), str(cfg), str(tmp_path)], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    ranks = [json.loads((tmp_path / f"rank{i}.json").read_text()) for i in (0, 1)]
    assert ranks[0]["world_size"] == 2
    assert ranks[0]["digest"] == ranks[1]["digest"]  # identical weights after every step
    assert ranks[0]["valid_loss"] == ranks[1]["valid_loss"]  # all-reduced validation
    assert ranks[0]["steps"] == 2 * (300 // 16 // 2)  # each rank took half of every epoch
    assert ranks[0]["valid_loss"][-1] < ranks[0]["valid_loss"][0]


def test_train_cli_under_torchrun(tmp_path, corpus_dir):
    cfg = write_config(tmp_path / "ddpcli.yaml", tmp_path, corpus_dir, train={"epochs": 1, "batch_size": 16})
    r = subprocess.run([*TORCHRUN, "-m", "transformer_cli", "train", "-c", str(cfg)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    run = tmp_path / "checkpoints" / "ddpcli"
    assert json.loads((run / "manifest.json").read_text())["world_size"] == 2
    assert (run / "published.pt").is_file() and len((run / "metrics.jsonl").read_text().splitlines()) == 1
