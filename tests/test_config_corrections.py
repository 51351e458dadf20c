"""config_corrections.py: the corrections: section, read and bounded like every section."""

from __future__ import annotations

import pytest
from helpers import write_config

from transformer_cli.config_corrections import CorrectionsConfig
from transformer_cli.config_loading import load_config
from transformer_cli.errors import UsageError


def test_corrections_are_off_by_default_and_their_keys_are_bounded(tmp_path, corpus_dir):
    path = write_config(tmp_path / "c.yaml", tmp_path, corpus_dir)
    cfg = load_config(str(path))
    assert cfg.corrections == CorrectionsConfig() and cfg.corrections.store is None
    with pytest.raises(UsageError, match="corrections.weight"):
        load_config(str(path), ["corrections.weight=-1"])
    assert load_config(str(path), ["corrections.store=fixes", "corrections.weight=8"]).corrections.weight == 8
