"""tfm: train, evaluate and serve Transformer translation models from the command line.

The Python API (`load`, `Translator`, `add_corrections`; see transformer_cli/api.py) is imported on first use, so
`import transformer_cli` (and `tfm --help`) does not import torch.
"""

from __future__ import annotations

from typing import Any

from .version import __version__

__all__ = ["Translator", "add_corrections", "load", "__version__"]


def __getattr__(name: str) -> Any:
    if name in ("load", "Translator", "add_corrections"):
        from . import api

        return getattr(api, name)
    raise AttributeError(f"module 'transformer_cli' has no attribute {name!r}")
