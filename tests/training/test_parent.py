"""training/parent.py: the model a run starts from (train.init_from): a checkpoint verified
(a missing one: one line, exit 2), `published` (nothing published yet: from scratch; the
run's own published.pt by path: followed as `published`), what it records, the lineage it
adds to the run's identity, and the run's settings: the parent's model (the config's dropouts
kept) and tokenizers, train.continued over train.*. (Whole runs: test_continued.py.)"""

from __future__ import annotations

import logging
import shutil

import pytest
from helpers import untrained_checkpoint, write_config

from transformer_cli.checkpoint import Checkpoint
from transformer_cli.config_loading import load_config
from transformer_cli.errors import UsageError
from transformer_cli.training.parent import PUBLISHED, Parent, continued_config, lineage, resolve_parent
from transformer_cli.training.run_dir import RunDir


@pytest.fixture
def setup(tmp_path, corpus_dir):
    """A checkpoint (d_model 32, 4 heads) and a config of another model (48 wide, dropout 0.3)."""
    checkpoint = untrained_checkpoint(tmp_path / "parent.pt")
    path = write_config(
        tmp_path / "child.yaml",
        tmp_path,
        corpus_dir,
        model={"d_model": 48, "dropout": 0.3},
        train={"init_from": str(checkpoint), "epochs": 9, "continued": {"epochs": 2, "lr": 1e-4}},
    )
    cfg = load_config(str(path))
    return cfg, checkpoint, RunDir(cfg.run_dir)


def test_a_checkpoint_is_verified_and_recorded(setup):
    cfg, checkpoint, run = setup
    parent = resolve_parent(cfg, run)
    assert isinstance(parent, Parent) and parent.path == checkpoint and parent.spec == str(checkpoint)
    sha256 = Checkpoint.read(checkpoint).sha256
    assert parent.record == {"from": str(checkpoint), "path": str(checkpoint), "sha256": sha256}
    assert parent.tokenizers().pair.state() == parent.pair.state() == Checkpoint.read(checkpoint).tokenizer
    assert parent.tokenizer_settings().kind == parent.pair.src.kind == "sentencepiece"
    cfg.train.init_from = str(checkpoint.with_name("missing.pt"))
    with pytest.raises(UsageError, match="train.init_from: no such checkpoint: .*missing.pt"):
        resolve_parent(cfg, run)
    checkpoint.with_name("damaged.pt").write_bytes(b"not a checkpoint")
    cfg.train.init_from = str(checkpoint.with_name("damaged.pt"))
    with pytest.raises(UsageError, match="^train.init_from: "):
        resolve_parent(cfg, run)
    cfg.train.init_from = None
    assert resolve_parent(cfg, run) is None


def test_published_is_this_runs_published_model_once_there_is_one(setup, caplog):
    cfg, checkpoint, run = setup
    cfg.train.init_from = PUBLISHED
    with caplog.at_level(logging.INFO, logger="tfm"):
        assert resolve_parent(cfg, run) is None
    assert "nothing is published in" in caplog.text and "training from scratch" in caplog.text
    run.create()
    shutil.copyfile(checkpoint, run.published)
    parent = resolve_parent(cfg, run)
    assert parent is not None and (parent.spec, parent.path) == (PUBLISHED, run.published)
    cfg.train.init_from = str(run.published)  # named by its path: followed as `published`
    assert resolve_parent(cfg, run).spec == PUBLISHED


def test_the_lineage_names_the_parent_as_configured(setup):
    cfg, _, run = setup
    parent = resolve_parent(cfg, run)
    named = lineage(cfg, "digest", parent)
    assert named == {
        "init_from": parent.checkpoint.sha256,  # a file: by its content
        "tokenizer": "digest",
        "continued": {  # train.continued in the shape it had before its keys moved (runs resume)
            "epochs": 2,
            "lr": 1e-4,
            "warmup_steps": None,
            "snapshot_every_steps": None,
            "average_last": None,
        },
    }
    assert (named["continued"]["epochs"], named["continued"]["lr"]) == (2, 1e-4)
    cfg.train.init_from = PUBLISHED
    assert lineage(cfg, "digest", parent)["init_from"] == PUBLISHED  # whichever model is published
    cfg.train.init_from = None
    assert lineage(cfg, "digest", None) is None


def test_a_continued_run_takes_the_parents_model_and_tokenizers_and_train_continued(setup, caplog):
    cfg, _, run = setup
    parent = resolve_parent(cfg, run)
    with caplog.at_level(logging.WARNING, logger="tfm"):
        out = continued_config(cfg, parent)
    assert (out.model.d_model, out.model.n_heads, out.model.dropout) == (32, 4, 0.3)  # the config's dropout
    assert "the model is the parent's" in caplog.text and "model.d_model 48 -> 32" in caplog.text
    assert (out.train.epochs, out.train.lr) == (2, 1e-4) and out.train.batch_size == cfg.train.batch_size
    assert out.tokenizer.kind == "sentencepiece" and cfg.model.d_model == 48  # the config is unchanged
