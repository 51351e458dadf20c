"""`tfm train --nproc-per-node N`: tfm starts the processes itself after taking the run's lock,
so a multi-process cron line gets tfm's exit codes (75 busy, 2 bad input, 0 done)."""

from __future__ import annotations

import pytest
from helpers import run_tfm
from reliability.cron_helpers import error_lines, run_dir

from transformer_cli.training.launch import failure
from transformer_cli.training.run_dir import RunDir


def outcome(*codes: int) -> tuple[int, str]:
    e = failure(dict(enumerate(codes)))
    return e.exit_code, str(e)


def test_exit_codes_of_the_processes_become_one():
    """(What a signal to the launcher gives, 143/130, is tested with real processes:
    tests/training/test_ddp.py.)"""
    # Bad input wins: the others were stopped for it (torch's launcher sends SIGTERM).
    assert outcome(0, 2) == (2, "") and outcome(-15, 2) == (2, "") and outcome(143, 2) == (2, "")
    assert outcome(1, -15) == (1, "") and outcome(143, 1) == (1, "")  # the failure, not the stop
    # A rank killed by a signal says nothing itself: exit 1 and one line naming it (not 137).
    assert outcome(1, -9) == (
        1,
        "rank 1 was killed by signal 9 (SIGKILL); the last saved state is kept: run the same command to resume",
    )
    assert outcome(-11, -15)[1].startswith("rank 0 was killed by signal 11 (SIGSEGV)")
    assert outcome(-15, -15)[1].startswith("rank 0 was killed by signal 15 (SIGTERM)")
    assert outcome(0, -40)[1].startswith("rank 1 was killed by signal 40;")  # a real-time signal
    assert outcome(143, 143) == (143, "")  # ranks signalled directly: they saved and stopped


@pytest.mark.slow
def test_a_busy_run_exits_75_before_any_process_starts(make_config):
    cfg = make_config("busy")
    holder = RunDir(run_dir(cfg))
    holder.lock()
    try:
        r = run_tfm("train", "-c", str(cfg), "--nproc-per-node", "2", "--quiet")
    finally:
        holder.unlock()
    assert r.returncode == 75, r.stderr
    [line] = error_lines(r.stderr)
    assert "is busy: another tfm train holds its lock" in line


@pytest.mark.slow
def test_two_processes_train_and_bad_input_is_exit_2(make_config, tmp_path):
    cfg = make_config("two", epochs=1)
    r = run_tfm("train", "-c", str(cfg), "--nproc-per-node", "2", "--quiet")
    assert r.returncode == 0, r.stderr
    run = run_dir(cfg)
    assert '"world_size": 2' in (run / "manifest.json").read_text() and (run / "published.pt").is_file()
    r = run_tfm(
        "train",
        "-c",
        str(cfg),
        "--nproc-per-node",
        "2",
        "--quiet",
        "--restart",
        "--init-from",
        str(tmp_path / "missing.pt"),
    )
    assert r.returncode == 2, r.stderr
    assert any("train.init_from: no such checkpoint" in line for line in error_lines(r.stderr))
