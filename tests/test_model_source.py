"""model_source.py: what a model argument names, told by what is on disk, not by its name: a
folder (an export or a Hugging Face model), a binary file (a checkpoint), or a config by file
or name, whose run's published model (else best.pt), or decode.ensemble's models, are meant;
what is none of these is one line saying where it looked."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from helpers import untrained_checkpoint, write_config

from transformer_cli.config_loading import load_config
from transformer_cli.errors import UsageError
from transformer_cli.model_source import published_model, resolve_model, resolve_models


@pytest.fixture
def run(tmp_path, corpus_dir):
    """A config whose run has a best.pt, and a checkpoint file."""
    cfg = write_config(tmp_path / "toy.yaml", tmp_path, corpus_dir)
    run_dir = load_config(str(cfg)).run_dir
    run_dir.mkdir(parents=True)
    checkpoint = untrained_checkpoint(tmp_path / "model.pt")
    shutil.copyfile(checkpoint, run_dir / "best.pt")
    return cfg, run_dir, checkpoint


def test_a_config_names_its_runs_published_model_else_its_best(run):
    cfg, run_dir, _ = run
    assert resolve_model(cfg) == run_dir / "best.pt"
    shutil.copyfile(run_dir / "best.pt", run_dir / "published.pt")
    assert resolve_model(str(cfg)) == run_dir / "published.pt" == published_model(run_dir, "toy.yaml")
    with pytest.raises(UsageError, match=r"no model in .*empty \(published.pt or best.pt\): train one with `tfm"):
        published_model(run_dir.parent / "empty", "toy.yaml")


def test_what_a_file_is_decides_not_its_name(run, tmp_path):
    cfg, run_dir, checkpoint = run
    odd_checkpoint, odd_config = tmp_path / "weights.yaml", tmp_path / "settings.pt"
    shutil.copyfile(checkpoint, odd_checkpoint)
    shutil.copyfile(cfg, odd_config)
    assert resolve_model(odd_checkpoint) == odd_checkpoint  # binary: a checkpoint
    assert resolve_model(odd_config) == run_dir / "best.pt"  # text: a config
    folder = tmp_path / "export"
    folder.mkdir()
    assert resolve_model(folder) == folder  # a folder: open_backend tells which kind


def test_a_config_with_an_ensemble_names_its_models(run, tmp_path, corpus_dir):
    _, _, checkpoint = run
    ensemble = write_config(tmp_path / "ens.yaml", tmp_path, corpus_dir, decode={"ensemble": [str(checkpoint), "b.pt"]})
    assert resolve_models(ensemble) == [checkpoint, Path("b.pt")]  # as written
    assert resolve_models(checkpoint) == [checkpoint]


def test_a_name_that_is_nothing_here_says_where_it_looked(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UsageError) as caught:
        resolve_model("nothing.pt")
    message = str(caught.value)
    assert message.startswith("nothing.pt: no such model file or export folder, and config file not found")
    assert "\n" not in message
