"""What every `tfm` command shares: the Typer app, option help texts, logging, error mapping.

The commands themselves are in cli_training.py and cli_models.py; cli.py puts them together.
"""

from __future__ import annotations

import functools
import logging
import os
import select
import sys
from collections.abc import Callable
from typing import Any

import typer

from .errors import EXIT_FAILURE, EXIT_STDOUT_CLOSED, TfmError, made_from
from .version import __version__

app = typer.Typer(
    name="tfm",
    help="Train, evaluate and serve Transformer translation models.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)

log = logging.getLogger("tfm")

CONFIG_HELP = (
    "Config file, or a bare name found in ./configs/ or among the configs shipped "
    "with tfm (base.yaml, seed.yaml, tiny.yaml, best.yaml)."
)
SET_HELP = "Override one config value, e.g. --set train.lr=3e-4 (repeatable)."
REVERSE_HELP = (
    "The config's reverse run (<name>.reverse: the languages swapped, the real pairs "
    "only), the model that back-translates for it (synthetic.back_translation)."
)


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]  # generic at run time from 3.11
    """Writes to whatever `sys.stderr` is when a line is logged (a caller that swaps it, as a
    test harness does, never leaves the handler on a closed stream)."""

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, _: Any) -> None:
        pass


def setup_logging(quiet: bool) -> None:
    """Timestamped lines on stderr; --quiet keeps warnings and errors only."""
    handler = _StderrHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s", "%Y-%m-%d %H:%M:%S"))
    log.handlers[:] = [handler]
    log.setLevel(logging.INFO)
    handler.setLevel(logging.WARNING if quiet else logging.INFO)
    log.propagate = False


def _stdout_closed() -> bool:
    """Whether stdout is a pipe or socket whose reader has gone (not a file: no)."""
    try:
        poll = select.poll()
        poll.register(sys.stdout.fileno(), select.POLLOUT)
    except (AttributeError, OSError, ValueError):  # no poll here, or stdout is no file (a test's capture)
        return False
    return any(events & (select.POLLERR | select.POLLHUP) for _, events in poll.poll(0))


def _discard_stdout() -> None:
    """Send stdout to /dev/null: what is still buffered for it goes nowhere, and the
    interpreter's last flush cannot fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def guarded(command: Callable[..., Any]) -> Callable[..., Any]:
    """Turn expected errors into one line on stderr and a documented exit code; a reader of
    stdout that left (`| head`) ends the command quietly, 141."""

    @functools.wraps(command)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except (typer.Exit, typer.Abort, SystemExit):
            raise
        except BaseException as e:
            if made_from(e, KeyboardInterrupt):  # (also when the code it landed in made another error of it)
                typer.echo("tfm: interrupted", err=True)
                raise typer.Exit(130) from None
            if isinstance(e, TfmError):
                if str(e):  # (a run tfm launched: its processes have said why)
                    typer.echo(f"tfm: error: {e}", err=True)
                raise typer.Exit(e.exit_code) from None
            if not isinstance(e, Exception):
                raise
            if isinstance(e, BrokenPipeError) and _stdout_closed():  # not a bug: the reader had enough
                _discard_stdout()
                raise typer.Exit(EXIT_STDOUT_CLOSED) from None
            if os.environ.get("TFM_DEBUG"):  # a bug: still one line, the traceback on request
                raise
            typer.echo(f"tfm: internal error: {type(e).__name__}: {e} (set TFM_DEBUG=1 for the traceback)", err=True)
            raise typer.Exit(EXIT_FAILURE) from None

    return run


def _version(value: bool) -> None:
    if value:
        typer.echo(f"tfm {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Train, evaluate and serve Transformer translation models."""


DEVICE_HELP = "auto (cuda, then mps, then cpu), cpu, cuda or mps."
PRECISION_HELP = (
    "fp32 (default: exact), bf16, fp16, or auto (bf16 where the hardware is fast at it, fp16 on older GPUs)."
)
