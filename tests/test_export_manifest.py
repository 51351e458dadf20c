"""export_manifest.py: ExportManifest, the typed tfm-export.json every export format writes:
made from the folder (every file's sha256, the format's own fields beside the common ones),
read back only when every listed file matches, and what makes a folder an export and names
the engine that runs it."""

from __future__ import annotations

import json

import pytest
from helpers import untrained_checkpoint

from transformer_cli.checkpoint import Checkpoint, CheckpointError
from transformer_cli.export_manifest import (
    FORMAT,
    MANIFEST,
    ExportManifest,
    export_engine,
    is_export,
    stated_engine,
)
from transformer_cli.fsutil import file_sha256
from transformer_cli.version import __version__


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    path = untrained_checkpoint(tmp_path_factory.mktemp("manifest") / "untrained.pt")
    return path, Checkpoint.read(path)


def exported(folder, checkpoint, engine="my-engine", **details) -> ExportManifest:
    """A folder of two files and its manifest, as a format's export writes it."""
    folder.mkdir()
    (folder / "weights.bin").write_bytes(b"\x00\x01weights")
    (folder / "vocab.txt").write_text("a\nb\n")
    path, read = checkpoint
    manifest = ExportManifest.new(engine, path, read, folder, **details)
    manifest.write(folder)
    return manifest


def test_a_manifest_names_the_engine_the_checkpoint_and_every_file(checkpoint, tmp_path):
    path, read = checkpoint
    manifest = exported(tmp_path / "out", checkpoint, level=3, unused=None)
    assert (manifest.format, manifest.engine, manifest.tfm_version) == (FORMAT, "my-engine", __version__)
    assert manifest.checkpoint == str(path) and manifest.checkpoint_sha256 == read.digest
    assert manifest.model == read.model_description() and manifest.config == read.config
    assert manifest.files == {
        "vocab.txt": file_sha256(tmp_path / "out" / "vocab.txt"),
        "weights.bin": file_sha256(tmp_path / "out" / "weights.bin"),
    }
    assert manifest.details == {"level": 3}  # None: left out
    raw = json.loads((tmp_path / "out" / MANIFEST).read_text())
    assert raw["level"] == 3 and "details" not in raw  # the format's own fields beside the others
    assert ExportManifest.read(tmp_path / "out") == manifest


def test_a_formats_own_field_cannot_take_a_common_name(checkpoint, tmp_path):
    path, read = checkpoint
    with pytest.raises(ValueError, match="an export's own fields cannot be named files, model"):
        ExportManifest.new("x", path, read, tmp_path, files={}, model="y", engine_version="1")


def test_a_changed_missing_or_foreign_folder_is_refused(checkpoint, tmp_path):
    folder = tmp_path / "out"
    exported(folder, checkpoint)
    (folder / "vocab.txt").write_text("a\nc\n")
    with pytest.raises(CheckpointError, match=r"export .*out is damaged: vocab.txt does not match its sha256"):
        ExportManifest.read(folder)
    (folder / "vocab.txt").unlink()
    with pytest.raises(CheckpointError, match=r"export .*out is incomplete: vocab.txt is missing"):
        ExportManifest.read(folder)
    raw = json.loads((folder / MANIFEST).read_text())
    (folder / MANIFEST).write_text(json.dumps({**raw, "files": [], "format": FORMAT}))
    with pytest.raises(CheckpointError, match="its manifest does not fit this tfm: "):
        ExportManifest.read(folder)
    (folder / MANIFEST).write_text(json.dumps({**raw, "format": "tfm-export/9"}))
    with pytest.raises(CheckpointError, match=f"is not a tfm export \\(format {FORMAT} expected in {MANIFEST}\\)"):
        ExportManifest.read(folder)
    (folder / MANIFEST).write_text("{")
    with pytest.raises(CheckpointError, match=f"cannot read {MANIFEST}"):
        ExportManifest.read(folder)


def test_a_folder_is_an_export_by_its_manifest_which_names_its_engine(checkpoint, tmp_path):
    exported(tmp_path / "mine", checkpoint, engine="transformers")
    assert is_export(tmp_path / "mine") and export_engine(tmp_path / "mine") == "transformers"
    (tmp_path / "plain").mkdir()
    assert not is_export(tmp_path / "plain") and export_engine(tmp_path / "plain") is None
    assert export_engine(tmp_path / "nowhere") is None
    old = tmp_path / "old"
    old.mkdir()
    (old / MANIFEST).write_text(json.dumps({"format": FORMAT}))  # before the engine was named
    assert export_engine(old) == "ctranslate2"
    (old / MANIFEST).write_text("not json")
    assert stated_engine(old) == "ctranslate2"  # read() then says what is wrong
    (old / MANIFEST).write_text(json.dumps({"engine": 3}))
    assert stated_engine(old) == "ctranslate2"
