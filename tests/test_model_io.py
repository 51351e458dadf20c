"""Where a model is: a missing DIR/FILE path is a missing checkpoint (exit 2), never a Hugging Face
Hub id looked up over the network; a CTranslate2 folder without tfm's manifest is named as such."""

from __future__ import annotations

import os
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest
from helpers import run_tfm, run_tfm_without, untrained_checkpoint, write_config

from transformer_cli.hf.folder import is_hub_id


@pytest.mark.parametrize(
    "spec, hub",
    [
        ("Helsinki-NLP/opus-mt-de-en", True),
        ("facebook/wmt19-de-en", True),
        ("EleutherAI/gpt-neo-1.3B", True),  # a dot is no file ending
        ("bad/nope.pt", False),  # ends like a file
        ("bad/nope.PTH", False),
        ("bad/model.safetensors", False),
        ("bad/run.yaml", False),
        ("here/nope", False),  # here/ exists: a path
        ("a/b/c", False),  # two slashes
        ("nope.pt", False),
    ],
)
def test_a_hub_id_is_owner_slash_name_that_is_no_path(spec, hub, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "here").mkdir()
    assert is_hub_id(spec) is hub


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
    from transformer_cli.export.bundle import export_checkpoint
    from transformer_cli.export.manifest import MANIFEST

    folder = tmp_path / "ct2"
    export_checkpoint(untrained_checkpoint(tmp_path / "tiny.pt"), folder)
    (folder / MANIFEST).unlink()
    r = run_tfm("translate", "--checkpoint", str(folder), "Ein Hund.", env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert (r.returncode, r.stdout) == (1, "")
    assert r.stderr == (
        f"tfm: error: {folder} is a CTranslate2 export folder whose {MANIFEST} is "
        "missing: tfm runs an export only with its manifest (export the checkpoint "
        "again with `tfm export`)\n"
    )
