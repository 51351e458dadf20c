"""The package's shape, as docs/architecture.md describes it: small modules, and sub-packages
that import only downward (data and model know nothing of training, serving or the CLI)."""

from __future__ import annotations

import ast
from pathlib import Path

import transformer_cli

PACKAGE = Path(transformer_cli.__file__).parent
MAX_LINES = 450
# The layers, bottom up (docs/architecture.md): a sub-package imports from its own layer and
# the ones below it. The modules beside them (config, errors, fsutil, records, ...) sit below
# all of them; the CLI modules above all.
LAYERS = [{"data"}, {"model"}, {"inference"}, {"export", "hf", "model_io"}, {"evaluate", "api"},
          {"synthetic"}, {"training"}, {"serving"}, {"cli", "cli_app", "cli_models", "cli_training"}]
ABOVE = {name: set().union(*LAYERS[i + 1:]) for i, layer in enumerate(LAYERS) for name in layer}


def _modules():
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def test_no_module_is_longer_than_450_lines():
    long = {str(p.relative_to(PACKAGE)): n for p in _modules()
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert not long, f"split these along their parts: {long}"


def _imported_packages(path: Path) -> set[str]:
    """The top-level parts of transformer_cli that `path` imports (relative or absolute)."""
    depth = len(path.relative_to(PACKAGE).parts) - 1  # 0: a top-level module
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:  # relative: climb to the package root
                if node.level <= depth:
                    continue  # within the sub-package
                parts = (node.module or "").split(".")
                names = [parts[0]] if parts[0] else [a.name for a in node.names]
            elif (node.module or "").startswith("transformer_cli."):
                names = [node.module.split(".")[1]]
            else:
                continue
            found.update(names)
        elif isinstance(node, ast.Import):
            found.update(a.name.split(".")[1] for a in node.names if a.name.startswith("transformer_cli."))
    return found


def test_sub_packages_import_only_downward():
    upward = {}
    for path in _modules():
        rel = path.relative_to(PACKAGE).parts
        if len(rel) < 2 or rel[0] not in ABOVE:  # the sub-packages
            continue
        bad = _imported_packages(path) & ABOVE[rel[0]]
        if bad:
            upward["/".join(rel)] = sorted(bad)
    assert not upward, f"imports from a layer above: {upward}"
