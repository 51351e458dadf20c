"""`python -m transformer_cli` runs the `tfm` command line."""

from .cli import main

main()
