"""cli_app.py: what every command shares: `guarded` turns tfm's errors into one stderr line and
their exit code (an interrupt 130, a bug one line unless TFM_DEBUG asks for the traceback),
logging on stderr (--quiet: warnings only; whatever stderr is when a line is logged), and
--version."""

from __future__ import annotations

import io
import logging
import signal
import sys
from types import SimpleNamespace

import pytest
import typer
from typer.testing import CliRunner

from transformer_cli import extras
from transformer_cli.cli_app import app, guarded, setup_logging
from transformer_cli.errors import BusyError, StoppedBySignal, TfmError, UsageError
from transformer_cli.version import __version__


@pytest.mark.parametrize(
    "error, code, line",
    [
        (TfmError("disk full"), 1, "tfm: error: disk full\n"),
        (UsageError("bad option"), 2, "tfm: error: bad option\n"),
        (BusyError("run busy"), 75, "tfm: error: run busy\n"),
        (StoppedBySignal(signal.SIGTERM, "stopped by signal 15"), 143, "tfm: error: stopped by signal 15\n"),
        (StoppedBySignal(signal.SIGTERM, ""), 143, ""),  # its processes have said why
    ],
)
def test_the_cli_says_each_in_one_line_and_exits_with_its_code(error, code, line):
    r = CliRunner().invoke(failing(error), [])
    assert (r.exit_code, r.stdout, r.stderr) == (code, "", line)


def failing(error: BaseException) -> typer.Typer:
    cli = typer.Typer()

    @cli.command()
    @guarded
    def fail() -> None:
        raise error

    return cli


def test_an_interrupt_and_a_bug_are_one_line_too(monkeypatch):
    r = CliRunner().invoke(failing(KeyboardInterrupt()), [])
    assert (r.exit_code, r.stderr) == (130, "tfm: interrupted\n")
    monkeypatch.delenv("TFM_DEBUG", raising=False)
    r = CliRunner().invoke(failing(ZeroDivisionError("division by zero")), [])
    assert (r.exit_code, r.stderr) == (
        1,
        "tfm: internal error: ZeroDivisionError: division by zero (set TFM_DEBUG=1 for the traceback)\n",
    )
    monkeypatch.setenv("TFM_DEBUG", "1")
    r = CliRunner().invoke(failing(ZeroDivisionError("division by zero")), [])
    assert isinstance(r.exception, ZeroDivisionError)  # the traceback, on request


def interrupted_import(name: str) -> None:
    """What pybind11 makes of a Ctrl-C while its extension module initialises (`import
    ctranslate2`, SentencePiece's first import): an ImportError raised from the interrupt."""
    try:
        raise KeyboardInterrupt
    except KeyboardInterrupt as e:
        raise ImportError("initialization failed") from e


def test_an_interrupt_is_one_whatever_the_code_it_landed_in_made_of_it(monkeypatch):
    """Not a bug (internal error: ImportError), nor a missing extra (import_extra's exit 2)."""
    monkeypatch.setattr(extras, "importlib", SimpleNamespace(import_module=interrupted_import))
    for call in (lambda: interrupted_import("sentencepiece"), lambda: extras.import_extra("ctranslate2", "tfm export")):
        cli = typer.Typer()
        cli.command()(guarded(call))
        r = CliRunner().invoke(cli, [])
        assert (r.exit_code, r.stderr) == (130, "tfm: interrupted\n")


def test_a_broken_pipe_other_than_stdout_is_still_a_bug(monkeypatch):
    """Only a stdout whose reader left ends a command quietly (141: tests/test_cli_feedback.py);
    a pipe to another process that broke is reported."""
    monkeypatch.delenv("TFM_DEBUG", raising=False)
    r = CliRunner().invoke(failing(BrokenPipeError(32, "Broken pipe")), [])
    assert (r.exit_code, r.stderr) == (
        1,
        "tfm: internal error: BrokenPipeError: [Errno 32] Broken pipe (set TFM_DEBUG=1 for the traceback)\n",
    )


def test_log_lines_go_to_stderr_as_it_is_then_and_quiet_keeps_warnings(monkeypatch):
    log = logging.getLogger("tfm")
    saved = (log.handlers[:], log.level, log.propagate)
    try:
        setup_logging(quiet=False)
        first, second = io.StringIO(), io.StringIO()
        monkeypatch.setattr(sys, "stderr", first)
        log.info("one")
        monkeypatch.setattr(sys, "stderr", second)  # swapped, as a test harness does
        log.info("two")
        assert first.getvalue().endswith(" one\n") and second.getvalue().endswith(" two\n")
        setup_logging(quiet=True)
        log.info("hidden")
        log.warning("shown")
        assert "hidden" not in second.getvalue() and second.getvalue().endswith(" shown\n")
        assert not log.propagate and len(log.handlers) == 1
    finally:
        log.handlers[:], log.level, log.propagate = saved


def test_the_app_says_its_version_and_its_help():
    r = CliRunner().invoke(app, ["--version"])
    assert (r.exit_code, r.stdout) == (0, f"tfm {__version__}\n")
    assert "Train, evaluate and serve Transformer translation models." in CliRunner().invoke(app, ["-h"]).stdout
