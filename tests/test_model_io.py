"""model_io.py: a model wherever it is, read as a Checkpoint: a checkpoint file (verified), a
Hugging Face folder (test_folder.py), never an export (which holds no trainable weights) or a
folder that is no model; a missing DIR/FILE path is a missing checkpoint (exit 2), never a
Hugging Face Hub id looked up over the network; a CTranslate2 folder without tfm's manifest is
named as such."""

from __future__ import annotations

import os
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest
from helpers import run_tfm, run_tfm_without, untrained_checkpoint, write_config


def test_a_missing_dir_slash_file_is_checkpoint_not_found(tmp_path, corpus_dir):
    tiny = untrained_checkpoint(tmp_path / "tiny.pt")
    cfg = write_config(tmp_path / "toy.yaml", tmp_path, corpus_dir)
    commands = {  # a Hub lookup would need huggingface_hub, made unimportable here
        "translate": ["translate", "--checkpoint", "bad/nope.pt", "Ein Hund."],
        "an ensemble member": ["translate", "--checkpoint", str(tiny), "--checkpoint", "bad/nope.pt", "Ein Hund."],
        "train --init-from": ["train", "-c", str(cfg), "--init-from", "bad/nope.pt", "--quiet"],
    }

    def run(n: int, args: list[str]) -> subprocess.CompletedProcess:
        return run_tfm_without(["huggingface_hub"], *args, folder=tmp_path / f"site{n}", cwd=tmp_path)

    with ThreadPoolExecutor(len(commands)) as pool:  # side by side: each imports torch
        runs = dict(zip(commands, pool.map(run, range(len(commands)), commands.values())))
    for what, r in runs.items():
        prefix = "train.init_from: " if what == "train --init-from" else ""
        assert (r.returncode, r.stdout, r.stderr) == (
            2,
            "",
            f"tfm: error: {prefix}checkpoint not found: bad/nope.pt\n",
        ), what
    assert not (tmp_path / "data").exists()  # refused before preprocessing


def test_a_ctranslate2_folder_without_its_manifest_is_named(tmp_path):
    from helpers import ct2_export

    from transformer_cli.export_manifest import MANIFEST

    folder = tmp_path / "ct2"
    ct2_export(untrained_checkpoint(tmp_path / "tiny.pt"), folder)
    (folder / MANIFEST).unlink()
    r = run_tfm("translate", "--checkpoint", str(folder), "Ein Hund.", env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert (r.returncode, r.stdout) == (1, "")
    assert r.stderr == (
        f"tfm: error: {folder} is a CTranslate2 export folder whose {MANIFEST} is "
        "missing: tfm runs an export only with its manifest (export the checkpoint "
        "again with `tfm export`)\n"
    )


def test_a_checkpoint_is_read_and_exports_and_other_folders_are_refused(tmp_path):
    import json

    from helpers import ct2_export

    from transformer_cli.api import open_torch
    from transformer_cli.checkpoint import Checkpoint
    from transformer_cli.contracts.engine import Engine
    from transformer_cli.errors import UsageError
    from transformer_cli.export_manifest import MANIFEST
    from transformer_cli.model_io import read_model
    from transformer_cli.seams import ENGINES

    tiny = untrained_checkpoint(tmp_path / "tiny.pt")
    checkpoint, where = read_model(tiny)
    assert where == tiny and checkpoint.digest == Checkpoint.read(tiny).digest
    assert read_model(str(tiny))[1] == tiny
    ct2_export(tiny, tmp_path / "ct2")
    with pytest.raises(UsageError, match="is an export for the ctranslate2 engine, which tfm does not read back as"):
        read_model(tmp_path / "ct2")
    manifest = json.loads((tmp_path / "ct2" / MANIFEST).read_text())
    (tmp_path / "ct2" / MANIFEST).write_text(json.dumps({**manifest, "engine": "onnx"}))
    with pytest.raises(UsageError, match="is an export for the onnx engine, which tfm does not read back as a"):
        read_model(tmp_path / "ct2")
    ENGINES.register("onnx", Engine(open_torch, lambda folder: Checkpoint.read(tiny)))  # keeps weights
    try:
        read_back, where = read_model(tmp_path / "ct2")
        assert (read_back.digest, where) == (Checkpoint.read(tiny).digest, tmp_path / "ct2")
    finally:
        ENGINES.unregister("onnx")
    (tmp_path / "notes").mkdir()
    with pytest.raises(UsageError, match="is a folder but not a model: no tfm export manifest, no transformers"):
        read_model(tmp_path / "notes")


def test_an_export_is_read_back_by_its_engines_reader_or_named_as_unread(tmp_path):
    """`checkpoint_reader`: the ENGINES entry's `read_checkpoint` (None: the engine keeps no
    trainable weights, or is unknown); `unread_exports`: the exports among paths without one."""
    import json

    from helpers import ct2_export

    from transformer_cli.api import TRANSFORMERS
    from transformer_cli.export_manifest import MANIFEST
    from transformer_cli.model_io import checkpoint_reader, unread_exports

    assert checkpoint_reader("transformers") is TRANSFORMERS.read_checkpoint is not None
    assert checkpoint_reader("ctranslate2") is None and checkpoint_reader("no-such-engine") is None
    tiny = untrained_checkpoint(tmp_path / "tiny.pt")
    ct2_export(tiny, tmp_path / "ct2")
    ct2_export(tiny, tmp_path / "other")
    manifest = json.loads((tmp_path / "other" / MANIFEST).read_text())
    (tmp_path / "other" / MANIFEST).write_text(json.dumps({**manifest, "engine": "onnx"}))
    paths = [tiny, tmp_path / "ct2", tmp_path / "other"]
    assert unread_exports(paths) == {str(tmp_path / "ct2"): "ctranslate2", str(tmp_path / "other"): "onnx"}
