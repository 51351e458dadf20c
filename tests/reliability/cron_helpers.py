"""Helpers for the cron-safety suite: start tfm processes, watch their run directories."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

TFM = [sys.executable, "-m", "transformer_cli"]


def write_cron_config(work: Path, data: dict[str, Path], **train) -> Path:
    """`<work>/cron.yaml`: the tiny test config on the shared preprocessed corpus (`cron_data`),
    training on one CPU thread into `<work>/checkpoints/cron`."""
    from helpers import write_config

    return write_config(
        work / "cron.yaml",
        work,
        data["corpus"],
        data={"dir": str(data["data"]), "cache_dir": str(data["cache"])},
        train={"device": "cpu", "threads": 1, "checkpoint_every_minutes": None, **train},
    )


def run_dir(config: Path) -> Path:
    """The run directory of a config written by the `make_config` fixture."""
    return config.parent / "checkpoints" / "cron"


class Tfm:
    """`tfm ARGS` started in the background; stderr goes to a file (no pipe to fill up). A fork
    of the test process's zygote (tests/zygote.py) unless `fresh`: a new `python -m
    transformer_cli`, for the tests of what happens as a process starts (lock contention) and
    the runs other runs are compared with."""

    def __init__(self, *args: str, log_to: Path, cwd: Path | None = None, fresh: bool = False):
        from helpers import forks
        from zygote import Forked

        self.err_path = log_to
        self.proc: subprocess.Popen[bytes] | Forked
        zygote = None if fresh else forks()
        if zygote is not None and zygote.can_run(dict(os.environ)):
            self.proc = Forked(zygote, zygote.start(*args, log_to=log_to, cwd=cwd))
        else:
            with open(log_to, "wb") as err:
                self.proc = subprocess.Popen([*TFM, *args], stdout=subprocess.DEVNULL, stderr=err, cwd=cwd)
        self.pid = self.proc.pid

    def wait(self, timeout: float = 120) -> int:
        return self.proc.wait(timeout)

    def kill(self, sig: int) -> None:
        self.proc.send_signal(sig)

    @property
    def stderr(self) -> str:
        return self.err_path.read_text(errors="replace")


def run_all(*commands: tuple[str, ...], timeout: float = 180) -> list[subprocess.CompletedProcess]:
    """Run several independent tfm commands at once and capture their stderr: forks of the test
    process's zygote where the environment allows (tests/zygote.py: no imports to repeat), else
    fresh processes (stdout captured too)."""
    from helpers import zygote_for

    zygote = zygote_for(dict(os.environ))
    if zygote is not None:
        logs = Path(tempfile.mkdtemp(prefix="tfm-run-all-"))
        try:
            return zygote.run_all(logs, *commands, timeout=timeout)
        finally:
            shutil.rmtree(logs, ignore_errors=True)
    procs = [
        subprocess.Popen([*TFM, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for args in commands
    ]
    results = []
    for args, p in zip(commands, procs):
        out, err = p.communicate(timeout=timeout)
        results.append(subprocess.CompletedProcess(args, p.returncode, out, err))
    return results


def wait_until(
    condition: Callable[[], bool], timeout: float = 60, what: str = "condition", alive: Tfm | None = None
) -> None:
    """Poll `condition` every 20 ms; fail after `timeout` s or if `alive` exits first."""
    deadline = time.monotonic() + timeout
    while not condition():
        if alive is not None and alive.proc.poll() is not None:
            raise AssertionError(f"tfm exited ({alive.proc.returncode}) before {what}:\n{alive.stderr}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def file_contains(path: Path, text: str) -> Callable[[], bool]:
    return lambda: path.is_file() and text in path.read_text(errors="replace")


def lock_holder(run: Path) -> str:
    lock = run / ".lock"
    return lock.read_text().strip() if lock.is_file() else ""


def epoch_ends(run: Path) -> list[tuple[int, float, float]]:
    """(step, train_loss, valid_loss) of each end-of-epoch record in metrics.jsonl."""
    lines = (run / "metrics.jsonl").read_text().splitlines()
    records = [json.loads(x) for x in lines if x.strip()]
    return [(r["step"], r["train_loss"], r["valid_loss"]) for r in records if r["end_of_epoch"]]


def checkpoint_files(run: Path) -> list[Path]:
    return sorted(run.rglob("*.pt"))


def temp_leftovers(run: Path) -> list[Path]:
    """Temp files of atomic writes (`.<name>.<random>.tmp`) still lying in the run directory."""
    return sorted(run.rglob(".*.tmp"))


def error_lines(stderr: str) -> list[str]:
    return [x for x in stderr.splitlines() if x.startswith("tfm: ")]


def progress(checkpoint: Path) -> dict:
    from transformer_cli.checkpoint import read_payload

    return read_payload(checkpoint)["train_state"]["progress"]
