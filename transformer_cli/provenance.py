"""Facts recorded in manifests so a run can be audited or reproduced: versions, git commit."""

from __future__ import annotations

import platform
import subprocess
from importlib import metadata
from pathlib import Path


def package_versions() -> dict[str, str]:
    """Versions of Python, tfm and the libraries whose behaviour shapes results."""
    versions = {"python": platform.python_version()}
    for name in ("tfm", "torch", "spacy", "sentencepiece", "sacrebleu"):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def git_commit(path: Path | None = None) -> str | None:
    """The commit of the checkout holding tfm's source (plus '-dirty'), or None outside git."""
    where = path or Path(__file__).resolve().parent
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=where, capture_output=True, text=True, timeout=5)
        if head.returncode != 0:
            return None
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=where,
            capture_output=True,
            text=True,
            timeout=5,
        )
        return head.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return None
