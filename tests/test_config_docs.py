"""The schema documents itself: help on every key, `tfm config`, docs/config.md kept current."""

from __future__ import annotations

import dataclasses

from helpers import ROOT, run_tfm

from transformer_cli.config import Config
from transformer_cli.config_docs import _rows, schema_markdown
from transformer_cli.training.run_dir import RESUMABLE_CHANGES


def test_every_key_has_help_text():
    missing = [key for key, f, _ in _rows(Config) if not f.metadata.get("help")]
    assert missing == []
    for f in dataclasses.fields(Config):
        assert f.metadata.get("help"), f.name


def test_docs_config_md_is_generated_from_the_schema():
    assert (ROOT / "docs" / "config.md").read_text() == schema_markdown(), (
        "docs/config.md is stale: run `tfm config --markdown > docs/config.md`"
    )


def test_resumable_keys_come_from_the_schema():
    assert {
        "epochs",
        "max_steps",
        "patience",
        "threads",
        "valid_bleu",
        "valid_decode",
        "promote",
        "average_last",
        "out_dir",
    } <= RESUMABLE_CHANGES
    assert not {"lr", "batch_tokens", "seed", "schedule_options", "criterion_options"} & RESUMABLE_CHANGES


def test_tfm_config_prints_the_resolved_config_with_help():
    r = run_tfm("config", "-c", "base.yaml", "--set", "train.lr=1e-3")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    at = lines.index("train.lr = 0.001")
    assert "Learning rate" in lines[at + 1] and "default 0.0005" in lines[at + 1] and "> 0" in lines[at + 1]
    assert "train.epochs = 15" in lines  # base.yaml's value
    # every key once, an options mapping as its entry's settings: adam's 3, cross_entropy's 2,
    # inverse_sqrt's 1, source_noise's 3, ctranslate2's 1, back-translation's sample's 3 for the
    # 6 mappings
    assert sum(1 for x in lines if " = " in x and not x.startswith(" ")) == len(_rows(Config)) + 7
    assert "synthetic.back_translation.search_options.temperature = 1.0" in lines
    assert "train.optimizer_options.betas = [0.9, 0.98]" in lines
    assert "train.transform_options.source_noise.lowercase = 0.15" in lines
