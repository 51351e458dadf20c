"""Faults on the data path while training reads it, with real processes and real signals: a
DataLoader worker killed, a shard cut short or overwritten with other bytes. Each ends the run
with one line naming the cause (exit 1), nothing is trained on garbage, and the same command
goes on afterwards."""

from __future__ import annotations

import os
import shutil
import signal
import time
from pathlib import Path

import pytest
from helpers import run_tfm
from reliability.cron_helpers import Tfm, error_lines, file_contains, run_dir, wait_until

pytestmark = pytest.mark.slow


def data_workers(pid: int) -> list[int]:
    """The DataLoader worker processes of the training process `pid` (its children: `tfm train`
    re-executes itself in place, so the trainer keeps the pid it was started with)."""
    return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def start_training(make_config, tmp_path, cwd: Path | None = None, **train) -> tuple[Tfm, Path, Path]:
    """`tfm train` of the config `make_config` writes, given as a path relative to `cwd` when
    that is given (where the process runs)."""
    cfg = make_config("run", epochs=40, data_workers=1, checkpoint_every_steps=5, **train)
    given = os.path.relpath(cfg, cwd) if cwd is not None else str(cfg)
    tfm = Tfm("train", "-c", given, "--quiet", log_to=tmp_path / "train.err", cwd=cwd)
    run = run_dir(cfg)
    wait_until(file_contains(run / "train.log", "first optimizer step done"), 60, "the first step", alive=tfm)
    return tfm, cfg, run


def test_a_killed_data_worker_is_one_line_and_the_run_resumes(make_config, tmp_path):
    tfm, cfg, run = start_training(make_config, tmp_path)
    wait_until(lambda: (run / "last.pt").is_file(), 60, "a saved state", alive=tfm)
    workers: list[int] = []
    for _ in range(200):  # workers live while an epoch trains (not during validation)
        workers = data_workers(tfm.pid)
        if workers:
            break
        time.sleep(0.05)
    assert workers, "no DataLoader worker to kill"
    os.kill(workers[-1], signal.SIGKILL)
    code = tfm.wait(120)
    lines = error_lines(tfm.stderr)
    assert code == 1, tfm.stderr
    assert len(lines) == 1 and "a data worker process died" in lines[0], tfm.stderr
    assert "the last saved state is kept: run the same command to resume" in lines[0]
    assert "Traceback" not in tfm.stderr and "Exception ignored" not in tfm.stderr
    r = run_tfm("train", "-c", str(cfg), "--quiet", "--set", "train.epochs=2")
    assert r.returncode == 0, r.stderr
    assert "resuming at epoch" in (run / "train.log").read_text()


@pytest.mark.parametrize("damage", ["cut short", "other bytes"])
def test_a_shard_damaged_while_training_reads_it_is_named(make_config, tmp_path, cron_data, damage):
    # A private copy of the prepared data: this test damages it.
    data = tmp_path / "data"
    shutil.copytree(cron_data["data"], data)
    cfg = make_config("run")
    cfg.write_text(cfg.read_text().replace(str(cron_data["data"]), str(data)))
    tfm, cfg, run = start_training(lambda *a, **k: cfg, tmp_path, cwd=tmp_path)  # -c run/cron.yaml
    shard = data / "cron" / "train.00000.src.bin"
    stat = shard.stat()
    if damage == "cut short":
        os.truncate(shard, 100)
    else:  # the same size, the same mtime: the start check cannot see it
        shard.write_bytes(os.urandom(stat.st_size))
        os.utime(shard, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    code = tfm.wait(120)
    lines = error_lines(tfm.stderr)
    assert code == 1 and len(lines) == 1, tfm.stderr
    # the command to run, with the config as it was given: it works as printed
    assert str(shard) in lines[0] and "`tfm preprocess -c run/cron.yaml --verify`" in lines[0], lines[0]
    assert "internal error" not in tfm.stderr
