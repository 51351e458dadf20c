"""Data-parallel training with 2 CPU processes (gloo), started by torchrun as a user would: what
the ranks compute and say. No assertion here reads a clock closely, so these run beside other
tests; the signal and death tests, which do, are in test_ddp.py."""

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import write_config
from training.ddp_helpers import TORCHRUN, preprocess

pytestmark = pytest.mark.slow  # two processes train


def test_two_processes_stay_in_sync(tmp_path, corpus_dir):
    cfg = write_config(tmp_path / "ddp.yaml", tmp_path, corpus_dir, train={"epochs": 2, "batch_size": 16})
    preprocess(cfg)
    worker = Path(__file__).with_name("ddp_worker.py")
    r = subprocess.run([*TORCHRUN, str(worker), str(cfg), str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    ranks = [json.loads((tmp_path / f"rank{i}.json").read_text()) for i in (0, 1)]
    assert ranks[0]["world_size"] == 2
    assert ranks[0]["digest"] == ranks[1]["digest"]  # the ranks end with identical weights
    assert ranks[0]["valid_loss"] == ranks[1]["valid_loss"]  # all-reduced validation
    assert ranks[0]["steps"] == 2 * (300 // 16 // 2)  # each rank took half of every epoch
    # the ranks met as often as each other (how often, against a clock: tests/training/test_cadence.py;
    # here it depends on how busy the machine is)
    assert ranks[0]["agreements"] == ranks[1]["agreements"] > 0
    assert ranks[0]["valid_loss"][-1] < ranks[0]["valid_loss"][0]
    # validation BLEU decoded half by each rank, gathered in order = decoded by one process
    assert ranks[0]["bleu"]["sharded"] == ranks[0]["bleu"]["alone"] == ranks[1]["bleu"]["alone"]
    assert ranks[0]["bleu"]["sharded"] > 0


def test_two_processes_compute_the_gradient_of_one_process_accumulating_their_batches(tmp_path, corpus_dir):
    """Token-budget batches hold different numbers of target tokens on the two ranks; the loss is
    normalised by the step's total, so 2 ranks x 1 batch equal 1 process x 2 batches."""
    import torch

    # One thread in every process: the same arithmetic (Adam turns the rounding noise of the
    # key biases' zero gradients into full-size steps, so another thread count would differ).
    cfg = write_config(
        tmp_path / "norm.yaml",
        tmp_path,
        corpus_dir,
        train={"batch_size": None, "batch_tokens": 160, "clip_norm": None, "threads": 1},
    )
    preprocess(cfg)
    worker, steps = str(Path(__file__).with_name("step_worker.py")), "10"
    two = subprocess.run(
        [*TORCHRUN, worker, str(cfg), steps, str(tmp_path / "two.pt")], capture_output=True, text=True, timeout=300
    )
    assert two.returncode == 0, two.stderr[-3000:]
    one = subprocess.run(
        [sys.executable, worker, str(cfg), steps, str(tmp_path / "one.pt"), "train.accumulate=2"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert one.returncode == 0, one.stderr[-3000:]
    two_ranks, one_process = (torch.load(tmp_path / f"{n}.pt") for n in ("two", "one"))
    # rank 0's token counts: its half of each step; the two ranks' batches differ in size
    assert sum(two_ranks["tokens"]) < sum(one_process["tokens"])
    assert 2 * sum(two_ranks["tokens"]) != sum(one_process["tokens"])
    for name, weight in one_process["state_dict"].items():
        torch.testing.assert_close(
            two_ranks["state_dict"][name], weight, rtol=0, atol=1e-5, msg=lambda m, name=name: f"{name}: {m}"
        )


def test_ranks_of_another_launcher_with_the_port_in_use_each_say_so_in_one_line(tmp_path, corpus_dir):
    """RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT set directly (a launcher other than torchrun),
    and MASTER_PORT held by another program: rank 0 cannot serve the meeting point (exit 2),
    rank 1 meets no one (exit 1); both say where in one line, within the rendezvous timeout."""
    cfg = write_config(
        tmp_path / "ranks.yaml", tmp_path, corpus_dir, train={"threads": 1, "device": "cpu", "rendezvous_timeout_s": 5}
    )
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()  # accepts connections, never speaks the store's protocol
        port = busy.getsockname()[1]
        started = time.monotonic()
        procs = []
        for rank in (0, 1):
            env = {
                **os.environ,
                "RANK": str(rank),
                "LOCAL_RANK": str(rank),
                "WORLD_SIZE": "2",
                "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": str(port),
            }
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-m", "transformer_cli", "train", "-c", str(cfg), "--quiet"],
                    env=env,
                    stderr=subprocess.PIPE,
                    text=True,
                )
            )
        outs = [p.communicate(timeout=120)[1] for p in procs]
    assert time.monotonic() - started < 60
    assert [p.returncode for p in procs] == [2, 1], outs
    for rank, err in enumerate(outs):
        [line] = err.strip().splitlines()
        assert line.startswith(f"tfm: error: rank {rank}: ") and f"127.0.0.1:{port}" in line, err
