"""export/bundle.py: the CTranslate2 export folder (model, tfm's tokenizer, the manifest),
written whole into its place, verified on read, and CT2_EXPORTER, the format's entry."""

from __future__ import annotations

import json
import shutil

import ctranslate2
import pytest
from helpers import ct2_export, untrained_checkpoint

from transformer_cli.checkpoint import Checkpoint, CheckpointError
from transformer_cli.errors import UsageError
from transformer_cli.export.bundle import CT2_EXPORTER, check_output, read_export
from transformer_cli.export.ct2_translator import Ct2Translator
from transformer_cli.export_manifest import MANIFEST
from transformer_cli.fsutil import file_sha256
from transformer_cli.seams import EXPORTERS
from transformer_cli.tokenizers.pair import TokenizerPair


@pytest.fixture(scope="module")
def untrained(tmp_path_factory):
    return untrained_checkpoint(tmp_path_factory.mktemp("bundle") / "untrained.pt")


def test_an_export_holds_the_model_the_tokenizer_and_a_manifest_of_every_file(untrained, tmp_path):
    manifest, seconds = ct2_export(untrained, tmp_path / "export", "int8")
    folder = tmp_path / "export"
    names = {p.name for p in folder.iterdir()}
    assert {"model.bin", "config.json", "tokenizer.json", MANIFEST} <= names
    assert set(manifest.files) == names - {MANIFEST} and seconds >= 0
    assert manifest.engine == "ctranslate2" and manifest.checkpoint == str(untrained)
    checkpoint = Checkpoint.read(untrained)
    assert manifest.checkpoint_sha256 == checkpoint.digest
    assert manifest.details == {
        "engine_version": ctranslate2.__version__,
        "quantization": "int8",
        "weights": "int8",
        "checkpoint_file_sha256": file_sha256(untrained),
    }
    read, tokenizers = read_export(folder)
    assert read == manifest
    assert tokenizers.state() == TokenizerPair.from_state(checkpoint.tokenizer).state()
    assert EXPORTERS.find("ctranslate2") is CT2_EXPORTER
    assert CT2_EXPORTER.describe(manifest) == "ctranslate2, int8 weights"
    assert CT2_EXPORTER.refusals(checkpoint) == []


def test_an_output_that_holds_something_else_is_refused_before_any_work(tmp_path):
    check_output(tmp_path / "new")  # nothing there: fine
    (tmp_path / "empty").mkdir()
    check_output(tmp_path / "empty")
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "keep.txt").write_text("mine")
    with pytest.raises(UsageError, match="notes exists and is not a tfm export: choose a new or empty --output"):
        check_output(tmp_path / "notes")
    (tmp_path / "file").write_text("a file")
    with pytest.raises(UsageError, match="exists and is not a tfm export"):
        check_output(tmp_path / "file")


def test_a_damaged_export_or_tokenizer_is_a_checkpoint_error(untrained, tmp_path):
    ct2_export(untrained, tmp_path / "export")
    broken = tmp_path / "broken"
    shutil.copytree(tmp_path / "export", broken)
    (broken / "tokenizer.json").write_text("{}")
    with pytest.raises(CheckpointError, match="tokenizer.json does not match its sha256"):
        read_export(broken)
    manifest = json.loads((broken / MANIFEST).read_text())
    manifest["files"]["tokenizer.json"] = file_sha256(broken / "tokenizer.json")
    (broken / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(CheckpointError, match=r"export .*broken: cannot load its tokenizer"):
        read_export(broken)


def test_export_folders_are_replaced_whole_and_verified(untrained, tmp_path):
    checkpoint = untrained  # exporting needs a model, not a trained one (no session's four models)
    target = tmp_path / "export"
    ct2_export(checkpoint, target, "int8")
    first = (target / "model.bin").read_bytes()
    ct2_export(checkpoint, target, "int16")  # an earlier export is replaced
    assert (target / "model.bin").read_bytes() != first
    assert sorted(p.name for p in tmp_path.iterdir()) == ["export"]  # nothing left beside it

    other = tmp_path / "notes"
    other.mkdir()
    (other / "keep.txt").write_text("mine")
    with pytest.raises(UsageError, match="exists and is not a tfm export"):
        ct2_export(checkpoint, other)
    with pytest.raises(UsageError, match="--quantization must be one of none, int8"):
        ct2_export(checkpoint, tmp_path / "new", "int4")
    assert (other / "keep.txt").read_text() == "mine" and not (tmp_path / "new").exists()
    with pytest.raises(UsageError, match=r"runs on auto, cpu or cuda \(got 'mps'\)"):
        Ct2Translator(target, "mps")
    if ctranslate2.get_cuda_device_count() == 0:
        with pytest.raises(UsageError, match="no CUDA GPU is visible to CTranslate2"):
            Ct2Translator(target, "cuda")

    damaged = tmp_path / "damaged"
    shutil.copytree(target, damaged)
    data = bytearray((damaged / "model.bin").read_bytes())
    data[len(data) // 2] ^= 1
    (damaged / "model.bin").write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="model.bin does not match its sha256"):
        Ct2Translator(damaged, "cpu")
    (damaged / MANIFEST).write_text("{}")
    with pytest.raises(CheckpointError, match="is not a tfm export"):
        Ct2Translator(damaged, "cpu")
