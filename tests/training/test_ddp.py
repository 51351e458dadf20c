"""Data-parallel training with 2 CPU processes (gloo), started by torchrun as a user would."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import run_tfm, write_config, write_corpus


def preprocess(cfg: Path) -> None:
    """In this process (a `tfm preprocess` process would spend seconds importing torch)."""
    from transformer_cli.config_loading import load_config
    from transformer_cli.data.preprocess import prepare

    prepare(load_config(str(cfg)))


TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
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


def test_ranks_of_another_launcher_with_the_port_in_use_each_say_so_in_one_line(tmp_path, corpus_dir):
    """RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT set directly (a launcher other than torchrun),
    and MASTER_PORT held by another program: rank 0 cannot serve the meeting point (exit 2),
    rank 1 meets no one (exit 1); both say where in one line, within the rendezvous timeout."""
    import socket

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
    # validation is redone, at beam 2 (decoding settings may change too), and a second epoch
    # or a long validation would only cost time.
    shorter = ["--set", "train.epochs=1", "--set", "decode.beam_size=2"]
    resumed = subprocess.run([*command, *shorter], capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "resuming at epoch" in resumed.stderr and "Epoch: 01" in resumed.stderr  # the validation redone
