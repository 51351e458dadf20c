"""One run, one writer: a second `tfm train` on a busy run exits 75 at once; a dead holder frees it."""

from __future__ import annotations

import os
import signal

from helpers import run_tfm
from reliability.cron_helpers import Tfm, epoch_ends, file_contains, lock_holder, run_dir, wait_until

from transformer_cli.config_loading import load_config
from transformer_cli.training.session import run_training


def test_second_train_on_a_busy_run_exits_75_naming_the_holder(tmp_path, make_config):
    cfg = make_config(epochs=3)
    run = run_dir(cfg)
    holder = Tfm("train", "-c", str(cfg), log_to=tmp_path / "holder.err", fresh=True)
    try:
        wait_until(lambda: lock_holder(run) == str(holder.pid), what="the lock", alive=holder)
        wait_until(file_contains(run / "train.log", "starting on"), what="training", alive=holder)
        # Freeze the holder mid-training (it keeps its lock) so the contender surely meets it.
        holder.kill(signal.SIGSTOP)
        assert holder.proc.poll() is None, "the holder finished before the contender could start"
        try:  # were it to wait for the lock, it would hang here (the holder is frozen)
            second = run_tfm("train", "-c", str(cfg), "--quiet", timeout=60, fresh=True)
        finally:
            holder.kill(signal.SIGCONT)
        assert second.returncode == 75, second.stderr
        lines = second.stderr.strip().splitlines()
        assert len(lines) == 1 and "busy" in lines[0] and f"(pid {holder.pid})" in lines[0], lines
        assert holder.wait() == 0, holder.stderr
    finally:
        if holder.proc.poll() is None:
            holder.kill(signal.SIGKILL)
            holder.wait()
    assert [step for step, _, _ in epoch_ends(run)] == [10, 20, 30]
    log = (run / "train.log").read_text()
    assert log.count(" INFO tfm train ") == 1 and "is busy" not in log  # the loser wrote nothing
    assert "finished (epochs)" in log


def test_lock_of_a_killed_holder_is_released_by_the_kernel(tmp_path, make_config):
    cfg = make_config(epochs=50)
    run = run_dir(cfg)
    holder = Tfm("train", "-c", str(cfg), log_to=tmp_path / "holder.err", fresh=True)
    wait_until(lambda: lock_holder(run) == str(holder.pid), what="the lock", alive=holder)
    holder.kill(signal.SIGKILL)
    assert holder.wait() == -signal.SIGKILL
    assert (run / ".lock").is_file() and lock_holder(run) == str(holder.pid)  # stale pid left
    # No manual cleanup: the next session simply takes the lock and trains.
    config = load_config(str(cfg))
    config.train.epochs = 1
    outcome = run_training(config)
    assert outcome.trained and outcome.progress.finished
    assert lock_holder(run) == str(os.getpid())
