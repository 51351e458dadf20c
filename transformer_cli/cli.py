"""The `tfm` command line: parse options, load the config, call one function, map errors.

No training or data logic lives here. torch and spaCy are imported inside the commands, so
`tfm --help` stays instant. The shared app and error mapping are in cli_app.py; the commands
in cli_training.py (preprocess, train, config, publish), cli_models.py (evaluate,
translate, serve, export) and cli_feedback.py (feedback).
"""

from __future__ import annotations

# Importing the command modules registers their commands, in this order in `tfm --help`.
import sys

from . import (
    cli_feedback,  # noqa: F401
    cli_models,  # noqa: F401
    cli_training,  # noqa: F401
)
from .cli_app import app
from .errors import TfmError
from .host import allocator

__all__ = ["app", "main"]

# Commands that run for long and allocate all the while: they start on the allocator
# `allocator.found()` names (a re-execution before anything else happens).
LONG_RUNNING = {"train", "serve"}


def main() -> None:
    command = next((a for a in sys.argv[1:] if not a.startswith("-")), None)
    if command in LONG_RUNNING:
        try:
            allocator.restart_with_preferred()
        except TfmError as e:
            print(f"tfm: error: {e}", file=sys.stderr)
            sys.exit(e.exit_code)
    app()


if __name__ == "__main__":
    main()
