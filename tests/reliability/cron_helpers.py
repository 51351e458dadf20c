"""Helpers for the cron-safety suite: start tfm processes, watch their run directories."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from transformer_cli import allocator

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
    """`tfm ARGS` started in the background; stderr goes to a file (no pipe to fill up)."""

    def __init__(self, *args: str, log_to: Path, cwd: Path | None = None):
        self.err_path = log_to
        self._err = open(log_to, "wb")
        self.proc = subprocess.Popen([*TFM, *args], stdout=subprocess.DEVNULL, stderr=self._err, cwd=cwd)
        self.pid = self.proc.pid

    def wait(self, timeout: float = 120) -> int:
        try:
            return self.proc.wait(timeout)
        finally:
            if self.proc.returncode is not None:
                self._err.close()

    def kill(self, sig: int) -> None:
        self.proc.send_signal(sig)

    @property
    def stderr(self) -> str:
        return self.err_path.read_text(errors="replace")


def run_all(*commands: tuple[str, ...], timeout: float = 180) -> list[subprocess.CompletedProcess]:
    """Run several independent tfm commands at once (they are mostly import time)."""
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


_ZYGOTE = r"""
import json, os, sys, traceback
import torch, torch._dynamo  # noqa: F401 - the slow imports (Adam pulls in torch._dynamo lazily)
import transformer_cli.cli as cli
import transformer_cli.training.promotion, transformer_cli.training.session  # noqa: F401

replies = os.fdopen(os.dup(1), "w", buffering=1)
for line in sys.stdin:
    request = json.loads(line)
    if "wait" in request:
        _, status = os.waitpid(request["wait"], 0)
        replies.write(f"{os.waitstatus_to_exitcode(status)}\n")
        continue
    pid = os.fork()
    if pid == 0:  # the child: `tfm ARGS` with stdin/stdout on /dev/null, stderr to a file
        code = 70
        try:
            null = os.open(os.devnull, os.O_RDWR)
            os.dup2(null, 0)
            os.dup2(null, 1)
            os.dup2(os.open(request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), 2)
            sys.argv = ["tfm", *request["argv"]]
            try:
                cli.main()
                code = 0
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        except BaseException:
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    replies.write(f"{pid}\n")
"""


class Zygote:
    """Starts `tfm` processes without paying python + torch imports (~2-4 s) each time.

    One helper process imports tfm and torch once (and runs no torch op, so forking it is
    safe); each `start()` forks it, and the child runs the real command line
    (`transformer_cli.cli.main`) as `python -m transformer_cli` would from there on: its own
    PID, lock, signal handling, files and exit code. Used where imports would dominate a test,
    above all the kill loop, whose kills must land in the session rather than in `import torch`.
    Lock contention, the SIGTERM'd run, disk full, the exit-code checks and the kill loop's
    final and reference runs use real `python -m transformer_cli` processes.
    """

    def __init__(self):
        # Session-scoped, so it starts before the per-test fixture that hides CI's data folder:
        # hide it here too (tests name their sources explicitly).
        env = {k: v for k, v in os.environ.items() if k != "TFM_DATA_SOURCE"}
        # Start it on the allocator `tfm train` would re-execute itself with, so that the
        # forks run as a real `tfm train` does and none of them restarts.
        if (library := allocator.found()) is not None:
            env.update(LD_PRELOAD=str(library), **{allocator.PRELOADED_ENV: str(library)})
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _ZYGOTE],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
            env=env,
        )

    def _ask(self, request: dict) -> int:
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        reply = self.proc.stdout.readline()
        if not reply:
            raise RuntimeError(f"the zygote died (exit {self.proc.wait()})")
        return int(reply)

    def start(self, *args: str, log_to: Path) -> int:
        """Fork `tfm ARGS`; returns its PID (stderr goes to `log_to`)."""
        return self._ask({"argv": list(args), "stderr": str(log_to)})

    def wait(self, pid: int) -> int:
        """Exit code of a child started here (-N: killed by signal N)."""
        return self._ask({"wait": pid})

    def run_all(self, folder: Path, *commands: tuple[str, ...]) -> list[subprocess.CompletedProcess]:
        """Run `tfm` commands side by side and wait for all; stderr captured (via `folder`)."""
        folder.mkdir(parents=True, exist_ok=True)
        started = []
        for args in commands:
            log = folder / f"forked-{len(list(folder.glob('forked-*')))}.err"
            log.touch()
            started.append((args, log, self.start(*args, log_to=log)))
        return [
            subprocess.CompletedProcess(args, self.wait(pid), "", log.read_text(errors="replace"))
            for args, log, pid in started
        ]

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(30)
