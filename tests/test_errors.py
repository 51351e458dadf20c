"""errors.py: the errors the CLI turns into one line and a documented exit code (1, 2, 75,
128+signal), a choice refused naming the option as the caller spelled it, and an error's first
line."""

from __future__ import annotations

import signal

import pytest

from transformer_cli.errors import (
    EXIT_BUSY,
    EXIT_FAILURE,
    EXIT_USAGE,
    BusyError,
    StoppedBySignal,
    TfmError,
    UsageError,
    check_choice,
    first_line,
)


def test_each_error_has_its_exit_code():
    assert (TfmError.exit_code, UsageError.exit_code, BusyError.exit_code) == (EXIT_FAILURE, EXIT_USAGE, EXIT_BUSY)
    assert (EXIT_FAILURE, EXIT_USAGE, EXIT_BUSY) == (1, 2, 75)
    assert issubclass(UsageError, TfmError) and issubclass(BusyError, TfmError)
    stopped = StoppedBySignal(signal.SIGTERM, "stopped")
    assert stopped.exit_code == 143 and StoppedBySignal(signal.SIGINT, "").exit_code == 130
    assert isinstance(stopped, TfmError) and str(stopped) == "stopped"


def test_a_choice_outside_the_choices_names_the_option():
    check_choice("--device", "cpu", ("cpu", "cuda"))
    check_choice("--device", None, ("cpu", "cuda"))  # not given
    with pytest.raises(UsageError, match=r"^device must be auto, cpu or cuda \(got 'tpu'\)$"):
        check_choice("device", "tpu", ("auto", "cpu", "cuda"))


def test_the_first_line_of_an_error_or_its_type():
    assert first_line(RuntimeError("one\ntwo")) == "one"
    assert first_line(KeyError()) == "KeyError" and first_line(ValueError("  ")) == "ValueError"
