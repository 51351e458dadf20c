"""Starts `tfm` processes without paying python's and torch's imports (~3-4 CPU s) each time.

One helper process imports tfm and torch once (and runs no torch op, so forking it is safe);
each `start()` forks it, and the child runs the real command line (`transformer_cli.cli.main`)
as `python -m transformer_cli` would from there on: its own PID, lock, signal handling,
files, environment, working folder, stdin/stdout/stderr and exit code. A reaper thread in
the helper waits for every child and writes its exit status to a file the test side polls,
so that any number of commands may run at once (the lock tests run two side by side).
`Forked` shows such a child as subprocess.Popen shows a process.

`helpers.run_tfm` and `cron_helpers.Tfm` run through one of these per test process when the
environment they would pass differs from the helper's only in tfm's own `TFM_*` variables
(read when a command runs, not when it imports; `TFM_ALLOCATOR*`, read at the start,
excepted), pytest's `PYTEST_CURRENT_TEST` and the inductor cache folder torch sets in the test
process; any other difference (an OMP or LD_PRELOAD setting torch reads at import) gets a
fresh `python -m transformer_cli`. Lock contention, the SIGTERM'd run, the exit-code checks and
the kill loop's final and reference runs start fresh processes too.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from transformer_cli.host import allocator

_SCRIPT = r"""
import json, os, sys, threading, traceback
import torch, torch._dynamo  # noqa: F401 - the slow imports (Adam pulls in torch._dynamo lazily)
import transformer_cli.cli as cli
import transformer_cli.training.promotion, transformer_cli.training.session  # noqa: F401

PRELOAD = {k: os.environ[k] for k in ("LD_PRELOAD", "TFM_ALLOCATOR_PRELOADED") if k in os.environ}
replies = os.fdopen(os.dup(1), "w", buffering=1)
statuses, lock, children = {}, threading.Lock(), threading.Semaphore(0)


def reap():
    while True:
        children.acquire()
        pid, status = os.wait()
        with lock:
            path = statuses.pop(pid)
        with open(path + ".tmp", "w") as f:
            f.write(str(os.waitstatus_to_exitcode(status)))
        os.replace(path + ".tmp", path)


threading.Thread(target=reap, daemon=True).start()


def child(request):
    code = 70
    try:
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        if request["argv"] and request["argv"][0] in cli.LONG_RUNNING:
            os.environ.update(PRELOAD)  # as the allocator's re-exec of a fresh process would
        for fd, path, flags in (
            (0, request.get("stdin") or os.devnull, os.O_RDONLY),
            (1, request.get("stdout") or os.devnull, os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
            (2, request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
        ):
            os.dup2(os.open(path, flags, 0o644), fd)
        sys.stdin = open(0, encoding="utf-8", closefd=False)  # not the helper's buffered requests
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


for line in sys.stdin:
    request = json.loads(line)
    with lock:
        pid = os.fork()
        if pid == 0:
            child(request)
        statuses[pid] = request["status"]
    children.release()
    replies.write(f"{pid}\n")
"""

# Variables a forked command may differ in: tfm's own, read when a command runs (but for the
# allocator's, read as the process starts); the one pytest changes before every test phase (the
# test's name); and the one torch._inductor's import sets in the test process (read when
# compiling). Nothing reads these at import.
_PER_COMMAND = "TFM_"
_PER_PROCESS = ("TFM_ALLOCATOR",)
_PER_TEST = ("PYTEST_CURRENT_TEST", "TORCHINDUCTOR_CACHE_DIR")


def _baseline(env: dict[str, str]) -> dict[str, str]:
    def per_command(k: str) -> bool:
        return (k.startswith(_PER_COMMAND) and not k.startswith(_PER_PROCESS)) or k in _PER_TEST

    return {k: v for k, v in env.items() if not per_command(k)}


class Zygote:
    """See the module docstring. `start`/`wait` for a command to signal or time; `run` and
    `run_all` for commands whose output is read."""

    def __init__(self, env: dict[str, str] | None = None) -> None:
        """`env`: the environment the helper imports under (default: this process's now); a
        command runs forked where its own differs from it only as `can_run` allows."""
        self.env = dict(os.environ if env is None else env)
        helper = {k: v for k, v in self.env.items() if k != "TFM_DATA_SOURCE"}
        # Started on the allocator `tfm train` would re-execute itself with, so that a forked
        # train runs as a real one does and none of them restarts.
        if (library := allocator.found()) is not None:
            helper.update(LD_PRELOAD=str(library), **{allocator.PRELOADED_ENV: str(library)})
        self.folder = Path(tempfile.mkdtemp(prefix="tfm-zygote-"))
        self._lock = threading.Lock()
        self._statuses: dict[int, Path] = {}
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _SCRIPT],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
            env=helper,
        )

    def can_run(self, env: dict[str, str]) -> bool:
        """Whether a command under `env` behaves in a fork as in a fresh process (see above)."""
        return self.proc.poll() is None and _baseline(env) == _baseline(self.env)

    def start(
        self,
        *args: str,
        log_to: Path,
        stdout_to: Path | None = None,
        stdin_from: Path | None = None,
        cwd: Path | None = None,
        env: dict[str, str] | None = None,
    ) -> int:
        """Fork `tfm ARGS`; returns its PID (stderr goes to `log_to`, stdout to `stdout_to`,
        else nowhere; stdin from `stdin_from`, else empty)."""
        with self._lock:
            status = self.folder / f"{len(self._statuses)}.status"
            request = {
                "argv": list(args),
                "stderr": str(log_to),
                "stdout": None if stdout_to is None else str(stdout_to),
                "stdin": None if stdin_from is None else str(stdin_from),
                "cwd": str(cwd or os.getcwd()),
                "env": {k: v for k, v in (os.environ if env is None else env).items() if k != "PWD"},
                "status": str(status),
            }
            assert self.proc.stdin is not None and self.proc.stdout is not None
            self.proc.stdin.write(json.dumps(request) + "\n")
            self.proc.stdin.flush()
            reply = self.proc.stdout.readline()
            if not reply:
                raise RuntimeError(f"the zygote died (exit {self.proc.wait()})")
            pid = int(reply)
            self._statuses[pid] = status
        return pid

    def wait(self, pid: int, timeout: float | None = None) -> int:
        """Exit code of a child started here (-N: killed by signal N). Past `timeout` seconds
        the child is killed and subprocess.TimeoutExpired raised, as subprocess.run does."""
        child = Forked(self, pid)
        try:
            return child.wait(timeout)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
            raise

    def exit_code(self, pid: int) -> int | None:
        """A child's exit code once it has ended (-N: killed by signal N), else None."""
        status = self._statuses[pid]
        return int(status.read_text()) if status.exists() else None

    def run(
        self,
        *args: str,
        cwd: Path | None = None,
        input: str | None = None,
        env: dict[str, str] | None = None,
        timeout: float | None = None,
    ) -> subprocess.CompletedProcess:
        """`tfm ARGS` to its end, its output captured, as `subprocess.run(..., text=True)`."""
        files = Path(tempfile.mkdtemp(dir=self.folder))
        stdin = None
        if input is not None:
            stdin = files / "stdin"
            stdin.write_text(input, encoding="utf-8")
        out, err = files / "stdout", files / "stderr"
        pid = self.start(*args, log_to=err, stdout_to=out, stdin_from=stdin, cwd=cwd, env=env)
        code = self.wait(pid, timeout)
        return subprocess.CompletedProcess(
            ["tfm", *args], code, out.read_text(errors="replace"), err.read_text(errors="replace")
        )

    def run_all(
        self, folder: Path, *commands: tuple[str, ...], timeout: float | None = None
    ) -> list[subprocess.CompletedProcess]:
        """Run `tfm` commands side by side and wait for all (each at most `timeout` s); stderr
        captured (via `folder`)."""
        folder.mkdir(parents=True, exist_ok=True)
        started = []
        for args in commands:
            log = folder / f"forked-{len(list(folder.glob('forked-*')))}.err"
            log.touch()
            started.append((args, log, self.start(*args, log_to=log)))
        return [
            subprocess.CompletedProcess(args, self.wait(pid, timeout), "", log.read_text(errors="replace"))
            for args, log, pid in started
        ]

    def close(self) -> None:
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.close()
        self.proc.wait(30)
        shutil.rmtree(self.folder, ignore_errors=True)


class Forked:
    """A child of a Zygote seen as subprocess.Popen sees its process: pid, poll, wait (raising
    TimeoutExpired without killing), returncode, send_signal, terminate and kill."""

    def __init__(self, zygote: Zygote, pid: int):
        self.zygote, self.pid = zygote, pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self.zygote.exit_code(self.pid)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(["tfm", str(self.pid)], timeout or 0.0)
            if self.zygote.proc.poll() is not None:  # its reaper is gone: no status will come
                raise RuntimeError(f"the zygote died (exit {self.zygote.proc.returncode})")
            time.sleep(0.005)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)
