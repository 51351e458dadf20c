"""Fixtures for the cron-safety suite: one synthetic corpus, preprocessed once per session.

Every config made here is named `cron`, so all runs share `<data>/cron/` (the preprocessed
corpus) and differ only in `train.out_dir`. Training uses one CPU thread: the runs are tiny,
and the killed, resumed and uninterrupted runs must do the same arithmetic.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import forks, write_corpus
from reliability.cron_helpers import write_cron_config


@pytest.fixture(scope="session")
def cron_data(tmp_path_factory) -> dict[str, Path]:
    from transformer_cli.config_loading import load_config
    from transformer_cli.data.preprocess import prepare

    root = tmp_path_factory.mktemp("cron_data")
    corpus = write_corpus(root / "corpus")
    paths = {"corpus": corpus, "data": root / "data", "cache": root / "cache"}
    prepare(load_config(str(write_cron_config(root, paths))))
    return paths


@pytest.fixture(scope="session")
def finished(tmp_path_factory, cron_data):
    """A finished one-epoch run with a published model; tests that damage it work on copies."""
    from reliability.cron_helpers import run_dir

    from transformer_cli.config_loading import load_config
    from transformer_cli.training.session import run_training

    root = tmp_path_factory.mktemp("finished")
    cfg = write_cron_config(root, cron_data, epochs=1)
    run_training(load_config(str(cfg)))
    return {"config": cfg, "run": run_dir(cfg)}


@pytest.fixture
def make_config(tmp_path, cron_data):
    """make_config(sub, **train): writes `<tmp>/<sub>/cron.yaml` (run: `<sub>/checkpoints/cron`)."""

    def make(sub: str = "a", **train) -> Path:
        return write_cron_config(tmp_path / sub, cron_data, **train)

    return make


@pytest.fixture(scope="session")
def tfm_fork():
    """Starts `tfm` processes with the imports already done (tests/zygote.py)."""
    return forks()
