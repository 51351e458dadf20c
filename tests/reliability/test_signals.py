"""SIGTERM / SIGINT: save a resumable last.pt, exit 143 / 130; a second signal exits at once."""

from __future__ import annotations

import os
import signal
import time

from reliability.cron_helpers import Tfm, epoch_ends, error_lines, progress, run_dir, wait_until

from transformer_cli.checkpoint import read_payload
from transformer_cli.config_loading import load_config
from transformer_cli.training.session import run_training


def test_sigterm_saves_a_resumable_checkpoint_and_the_same_command_resumes(tmp_path, make_config, tfm_fork):
    cfg = make_config(epochs=5)
    run = run_dir(cfg)
    proc = Tfm("train", "-c", str(cfg), log_to=tmp_path / "train.err", fresh=True)
    wait_until((run / "last.pt").is_file, what="the first checkpoint (end of epoch 1)", alive=proc)
    sent = time.monotonic()
    proc.kill(signal.SIGTERM)
    assert proc.wait(60) == 143, proc.stderr
    assert time.monotonic() - sent < 10
    assert "SIGTERM received" in proc.stderr
    [line] = error_lines(proc.stderr)
    assert "stopped by signal 15" in line and "run the same command to resume" in line
    assert "Traceback" not in proc.stderr
    state = progress(run / "last.pt")
    assert not state["finished"] and 10 <= state["step"] < 50
    assert not (run / "promotions.log").exists()  # a stopped session promotes nothing

    [again] = tfm_fork.run_all(tmp_path, ("train", "-c", str(cfg)))  # the very same command
    assert again.returncode == 0, again.stderr
    assert f"resuming at epoch {state['epoch'] + 1}, step {state['step']}" in again.stderr
    assert [s for s, _, _ in epoch_ends(run)] == [10, 20, 30, 40, 50]
    assert progress(run / "last.pt")["finished"]


def test_sigint_exits_130_and_a_second_signal_exits_at_once(tmp_path, make_config, tfm_fork):
    # Two runs side by side: A gets one SIGINT (graceful stop, 130, "stopped by signal 2"); B gets
    # SIGINT and then SIGTERM right behind it, which must end it at once with 128 + 15 = 143.
    cfg_a, cfg_b = make_config("a", epochs=4), make_config("b", epochs=4)
    err_a, err_b = tmp_path / "a.err", tmp_path / "b.err"
    a, b = (tfm_fork.start("train", "-c", str(c), log_to=e) for c, e in ((cfg_a, err_a), (cfg_b, err_b)))
    wait_until((run_dir(cfg_a) / "last.pt").is_file, what="A's first checkpoint")
    sent_a = time.monotonic()
    os.kill(a, signal.SIGINT)
    wait_until((run_dir(cfg_b) / "last.pt").is_file, what="B's first checkpoint")
    sent_b = time.monotonic()
    os.kill(b, signal.SIGINT)
    os.kill(b, signal.SIGTERM)
    code_b, seconds_b = tfm_fork.wait(b), time.monotonic() - sent_b
    code_a, seconds_a = tfm_fork.wait(a), time.monotonic() - sent_a
    assert seconds_a < 10 and seconds_b < 10
    stderr_a, stderr_b = err_a.read_text(), err_b.read_text()
    assert code_a == 130, stderr_a
    assert code_b == 143, stderr_b
    [line] = error_lines(stderr_a)
    assert "stopped by signal 2" in line and "Traceback" not in stderr_a
    assert "SIGINT received" in stderr_b and "stopped by signal" not in stderr_b
    for path in [*run_dir(cfg_a).glob("*.pt"), *run_dir(cfg_b).glob("*.pt")]:
        read_payload(path)  # whatever either had written is whole
    assert progress(run_dir(cfg_b) / "last.pt")["step"] >= 10  # B still has its epoch-1 state
    step = progress(run_dir(cfg_a) / "last.pt")["step"]
    assert 10 <= step < 40
    outcome = run_training(load_config(str(cfg_a)))  # A resumes (in-process: quicker)
    assert outcome.trained and outcome.progress.step == 40
    log = (run_dir(cfg_a) / "train.log").read_text()
    assert f"resuming at epoch {step // 10 + 1}, step {step}" in log
