"""The `tfm` command line: parse options, load the config, call one function, map errors.

No training or data logic lives here. torch and spaCy are imported inside the commands, so
`tfm --help` stays instant. The shared app and error mapping are in cli_app.py; the commands
in cli_training.py (preprocess, train, config, publish) and cli_models.py (evaluate,
translate, serve, export).
"""

from __future__ import annotations

# Importing the command modules registers their commands, in this order in `tfm --help`.
from . import cli_training  # noqa: F401
from . import cli_models  # noqa: F401
from .cli_app import app

__all__ = ["app", "main"]


def main() -> None:
    app()


if __name__ == "__main__":
    main()
