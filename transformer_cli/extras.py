"""The optional dependencies (pyproject.toml's extras), imported in one place.

Every module tfm imports from an extra is listed in `EXTRAS`; `import_extra` imports it, or
raises a one-line UsageError (exit 2) naming what needs it and the extra to install, e.g.

    tfm serve needs the serve extra: pip install 'tfm[serve]' (No module named 'uvicorn')

whatever the install (a plain `pip install tfm` has none of them).
"""

from __future__ import annotations

import importlib
from types import ModuleType

from .errors import UsageError, first_line

# module -> the extra that installs it
EXTRAS = {
    "fastapi": "serve",
    "uvicorn": "serve",
    "prometheus_client": "serve",
    "ctranslate2": "ctranslate2",
    "safetensors": "hf",
    "safetensors.torch": "hf",
    "huggingface_hub": "hf",
    "transformers": "hf",
    "tensorboard": "tensorboard",
}


def install_hint(extra: str) -> str:
    return f"pip install 'tfm[{extra}]'"


def import_extra(module: str, needed_by: str) -> ModuleType:
    """The module `module` (a key of EXTRAS), or a UsageError: "`needed_by` needs the EXTRA
    extra: pip install 'tfm[EXTRA]' (the import's own error)"."""
    extra = EXTRAS[module]
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise UsageError(f"{needed_by} needs the {extra} extra: {install_hint(extra)} ({first_line(e)})") from None


def require_extra(extra: str, needed_by: str) -> None:
    """Import every module of `extra` (see `import_extra`): a command checks its extra before
    it does anything else."""
    for module, its_extra in EXTRAS.items():
        if its_extra == extra and "." not in module:
            import_extra(module, needed_by)
