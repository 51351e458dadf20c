"""Data-parallel training with 2 CPU processes (gloo) stopped by signals and deaths, started by
torchrun as a user would. Their assertions bound how soon every rank is gone, so this module
runs alone (tests/conftest.py's SERIAL_MODULES); test_ddp_results.py has the rest."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import run_tfm, write_config, write_corpus
from training.ddp_helpers import TORCHRUN, preprocess

pytestmark = pytest.mark.slow  # two processes train
# The runs that are interrupted and resumed, and the uninterrupted one they must end equal to.
INTERRUPTED = {"epochs": 4, "batch_size": 16, "checkpoint_every_minutes": None}
# torchrun escalates SIGTERM to SIGKILL after 30 s; ranks that stop by themselves (one step or
# decoding batch, one save: a few seconds) are gone well within this, on a busy one too.
STOPPED_BY_THEMSELVES_S = 20


def torchrun_train(cfg: Path, *options: str) -> list[str]:
    return [*TORCHRUN, "-m", "transformer_cli", "train", "-c", str(cfg), *options]


def tfm_train_2(cfg: Path, *options: str) -> list[str]:
    """`tfm train --nproc-per-node 2`: tfm starts the two ranks through torchrun's code itself."""
    return [sys.executable, "-m", "transformer_cli", "train", "-c", str(cfg), "--nproc-per-node", "2", *options]


def error_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("tfm: ")]


def assert_no_launcher_report(text: str) -> None:
    """None of torch's launcher's own report reached the output: only tfm's lines."""
    for noise in (
        "death signal",
        "SignalException",
        "ChildFailedError",
        "Traceback",
        "internal error",
        "torch/distributed",
    ):
        assert noise not in text, text[-3000:]


def rank_of(pid: int) -> int:
    """The global rank torchrun gave the process `pid`."""
    environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return int(next(v for v in environ if v.startswith(b"RANK=")).split(b"=")[1])


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory, corpus_dir) -> dict:
    """The final weights of a two-process run of INTERRUPTED that nothing stopped."""
    work = tmp_path_factory.mktemp("ddp-whole")
    cfg = write_config(work / "whole.yaml", work, corpus_dir, train=INTERRUPTED)
    preprocess(cfg)
    whole = subprocess.run(torchrun_train(cfg, "--promote", "never"), capture_output=True, text=True, timeout=300)
    assert whole.returncode == 0, whole.stderr[-3000:]
    return _final_weights(work / "checkpoints" / "whole")


def assert_same_weights(got: dict, expected: dict) -> None:
    import torch

    assert got.keys() == expected.keys()
    for name, weight in expected.items():
        assert torch.equal(got[name], weight), name


def test_train_cli_under_torchrun_a_rank_that_dies_resume_and_world_size(tmp_path, corpus_dir, uninterrupted):
    """`tfm train --nproc-per-node 2` (torchrun's code, started by tfm): a rank SIGKILLed mid-run
    stops the other at once with one line, and tfm exits 1 with one line naming the killed rank
    and its signal (not 137, and none of torchrun's report); the same command resumes and ends
    with the weights of an uninterrupted two-process run under torchrun; one process then finds
    the finished run a no-op, and refuses to continue it under another world size."""
    import os
    import signal
    import time

    cfg = write_config(tmp_path / "die.yaml", tmp_path, corpus_dir, train=INTERRUPTED)
    preprocess(cfg)
    command = tfm_train_2(cfg)
    log = tmp_path / "torchrun.log"
    # a last.pt to resume from exists after the first epoch
    launcher, workers = _launch_until(command, log, "Epoch: 01")
    try:
        rank = rank_of(workers[-1])
        os.kill(workers[-1], signal.SIGKILL)
        killed = time.monotonic()
        assert launcher.wait(timeout=60) == 1
        stopped = time.monotonic() - killed
        assert stopped < 15, f"{stopped:.1f} s\n{log.read_text()[-3000:]}"
    finally:
        launcher.kill()
    text = log.read_text()
    assert "another training process stopped or crashed" in text, text[-3000:]
    assert error_lines(text)[-1] == (
        f"tfm: error: rank {rank} was killed by signal 9 (SIGKILL); the last "
        "saved state is kept: run the same command to resume"
    ), text[-3000:]
    assert_no_launcher_report(text)
    resumed = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "resuming at epoch" in resumed.stderr
    run = tmp_path / "checkpoints" / "die"
    assert json.loads((run / "manifest.json").read_text())["world_size"] == 2
    assert (run / "published.pt").is_file() and len((run / "metrics.jsonl").read_text().splitlines()) == 4
    assert_same_weights(_final_weights(run), uninterrupted)
    # Continuing the finished two-process run (more epochs) in one process would re-split the
    # batches: refused with one line saying what to do. Unchanged, it is a no-op.
    more = run_tfm("train", "-c", str(cfg), "--set", "train.epochs=5")
    assert more.returncode == 2, more.stderr[-2000:]
    assert more.stderr.strip().splitlines()[-1] == (
        f"tfm: error: {run / 'last.pt'} was written by 2 training process(es), this is 1: resume "
        "it with 2 (torchrun --nproc_per_node, times --nnodes), or start the run over with --restart"
    )
    assert run_tfm("train", "-c", str(cfg), "-q").returncode == 0


def _launch_until(command: list[str], log: Path, line: str) -> tuple[subprocess.Popen, list[int]]:
    """torchrun started with `command`, output to `log`, once `line` is in the log (at most
    120 s); with the PIDs of its two ranks."""
    import time

    with open(log, "w") as out:
        launcher = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while line not in log.read_text() and time.monotonic() < deadline and launcher.poll() is None:
        time.sleep(0.05)
    children = subprocess.run(["ps", "--ppid", str(launcher.pid), "-o", "pid="], capture_output=True, text=True)
    ranks = [int(p) for p in children.stdout.split()]
    if len(ranks) != 2:
        launcher.kill()
        raise AssertionError(log.read_text()[-2000:])
    return launcher, ranks


def _final_weights(run: Path) -> dict:
    import torch

    return torch.load(run / "last.pt", weights_only=True)["state_dict"]


def test_sigterm_to_torchrun_stops_every_rank_and_resumes_exactly(tmp_path, corpus_dir, uninterrupted):
    """SIGTERM to `tfm train --nproc-per-node 2` mid-run (as systemd or a scheduler sends it):
    torchrun's code passes it on, both ranks stop by themselves at their next step, one state
    saved, long before torchrun would SIGKILL them; tfm exits 143 with rank 0's one line and
    none of torchrun's report; the same command resumes and ends with the weights of an
    uninterrupted two-process run under torchrun."""
    import os
    import signal
    import time

    import torch

    cfg = write_config(tmp_path / "cut.yaml", tmp_path, corpus_dir, train=INTERRUPTED)
    preprocess(cfg)
    command = tfm_train_2(cfg, "--promote", "never")
    log = tmp_path / "cut.log"
    launcher, ranks = _launch_until(command, log, "Epoch: 02")
    try:
        launcher.send_signal(signal.SIGTERM)
        signalled = time.monotonic()
        while any(os.path.exists(f"/proc/{pid}") for pid in ranks) and time.monotonic() - signalled < 30:
            time.sleep(0.05)
        gone_after = time.monotonic() - signalled
        assert launcher.wait(timeout=30) == 143
    finally:
        launcher.kill()
    text = log.read_text()
    assert gone_after < STOPPED_BY_THEMSELVES_S, f"ranks still running {gone_after:.1f} s after SIGTERM"
    run = tmp_path / "checkpoints" / "cut"
    assert error_lines(text) == [
        f"tfm: error: stopped by signal 15; state saved to {run / 'last.pt'} (run the same command to resume)"
    ], text[-3000:]
    assert_no_launcher_report(text)
    saved = torch.load(run / "last.pt", weights_only=True)["train_state"]["progress"]
    assert 0 < saved["step"] < 4 * (300 // 16 // 2)  # stopped mid-run

    resumed = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "resuming at epoch" in resumed.stderr
    assert_same_weights(_final_weights(run), uninterrupted)


def test_sigterm_during_a_validation_under_torchrun_stops_every_rank_within_seconds(tmp_path):
    """A long validation (beam 64 over the validation set) on 2 ranks, SIGINT (Ctrl-C) to
    `tfm train --nproc-per-node 2` once it has begun: torchrun's code passes it on, the ranks
    agree at their next decoding batch, save once and are gone long before torchrun would
    SIGKILL them (they used to finish the validation first: the resumed run redoes it); tfm
    exits 130 with one line; the same command resumes it."""
    import os
    import signal
    import time

    # 600 validation sentences at beam 64: several seconds of decoding per rank on any machine.
    corpus = write_corpus(tmp_path / "corpus", {"train": 200, "val": 600, "test_2016_flickr": 10})
    cfg = write_config(
        tmp_path / "val.yaml",
        tmp_path,
        corpus,
        train={
            "threads": 1,
            "device": "cpu",
            "epochs": 2,
            "valid_bleu": True,
            "valid_decode": "beam",
            "checkpoint_every_minutes": None,
        },
        decode={"beam_size": 64, "max_len_b": 40, "batch_size": 4},
    )
    preprocess(cfg)
    command = tfm_train_2(cfg, "--promote", "never")
    log = tmp_path / "val.log"
    launcher, ranks = _launch_until(command, log, "validation BLEU: translating")
    try:
        time.sleep(0.5)
        launcher.send_signal(signal.SIGINT)
        signalled = time.monotonic()
        while any(os.path.exists(f"/proc/{pid}") for pid in ranks) and time.monotonic() - signalled < 60:
            time.sleep(0.05)
        gone_after = time.monotonic() - signalled
        assert launcher.wait(timeout=30) == 130
    finally:
        launcher.kill()
    text = log.read_text()
    assert gone_after < STOPPED_BY_THEMSELVES_S, f"ranks still running {gone_after:.1f} s after SIGINT"
    [line] = error_lines(text)
    assert line.startswith("tfm: error: stopped by signal 2; state saved to"), text[-3000:]
    assert_no_launcher_report(text)
    # Resumed for the interrupted epoch alone (train.epochs may change on resume): its
    # validation is redone, its loss without BLEU (train.valid_bleu may change too), and a
    # second epoch or decoding 600 sentences again would only cost time.
    shorter = ["--set", "train.epochs=1", "--set", "train.valid_bleu=false"]
    resumed = subprocess.run([*command, *shorter], capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "resuming at epoch" in resumed.stderr and "Epoch: 01" in resumed.stderr  # the validation redone
