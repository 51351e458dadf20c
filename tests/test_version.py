"""version.py: one version, the same in the package, `tfm --version`, pyproject.toml and
every export's manifest; the module imports nothing."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from typer.testing import CliRunner

import transformer_cli
from transformer_cli import version
from transformer_cli.cli import app

ROOT = Path(__file__).resolve().parent.parent


def test_one_version_everywhere():
    assert re.fullmatch(r"\d+\.\d+\.\d+", version.__version__)
    assert transformer_cli.__version__ == version.__version__
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert re.search(r'^version = "([^"]+)"$', pyproject, re.MULTILINE).group(1) == version.__version__
    assert CliRunner().invoke(app, ["--version"]).stdout == f"tfm {version.__version__}\n"


def test_it_imports_nothing():
    tree = ast.parse(Path(version.__file__).read_text(encoding="utf-8"))
    assert not [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]
