"""provenance.py: what manifests record to audit a run: the versions of Python, tfm and the
libraries that shape results, and the git commit of tfm's checkout (dirty or not; None
outside git)."""

from __future__ import annotations

import platform
import subprocess
from importlib import metadata

from transformer_cli.provenance import git_commit, package_versions


def test_the_versions_of_what_shapes_results():
    versions = package_versions()
    assert set(versions) == {"python", "tfm", "torch", "spacy", "sentencepiece", "sacrebleu"}
    assert versions["python"] == platform.python_version() and versions["torch"] == metadata.version("torch")


def test_the_commit_of_a_checkout_and_whether_it_is_dirty(tmp_path):
    assert git_commit(tmp_path) is None  # not a checkout

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=tmp_path, capture_output=True, text=True, check=True).stdout.strip()

    git("init", "-q")
    (tmp_path / "a.txt").write_text("one\n")
    git("add", "a.txt")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    head = git("rev-parse", "HEAD")
    assert git_commit(tmp_path) == head
    (tmp_path / "a.txt").write_text("two\n")
    assert git_commit(tmp_path) == head + "-dirty"
    (tmp_path / "untracked.txt").write_text("x")
    (tmp_path / "a.txt").write_text("one\n")
    assert git_commit(tmp_path) == head  # untracked files do not count
