"""data/manifest.py: DataManifest, the typed manifest.json of a prepared folder: written and
read back field for field, None (or OtherFormat) for what another tfm wrote or what is
malformed, and the summary table `tfm preprocess` prints of it."""

from __future__ import annotations

import dataclasses
import json

import pytest
from helpers import write_config

from transformer_cli.config_loading import load_config
from transformer_cli.data.manifest import (
    FORMAT_VERSION,
    DataManifest,
    Dropped,
    OtherFormat,
    Rates,
    summary_table,
    unknown_line,
)
from transformer_cli.data.preprocess import prepare


@pytest.fixture(scope="module")
def manifest(tmp_path_factory, corpus_dir) -> DataManifest:
    work = tmp_path_factory.mktemp("data-manifest")
    prepared, _ = prepare(load_config(str(write_config(work / "m.yaml", work, corpus_dir))))
    return prepared.manifest


def test_a_manifest_round_trips_and_a_foreign_one_reads_as_none(manifest, tmp_path):
    manifest.write(tmp_path)
    assert DataManifest.load(tmp_path) == manifest == DataManifest.read(tmp_path)
    assert manifest.format == FORMAT_VERSION and manifest.langs == ("de", "en")
    raw = json.loads((tmp_path / "manifest.json").read_text())
    (tmp_path / "manifest.json").write_text(json.dumps({**raw, "format": FORMAT_VERSION + 1}))
    with pytest.raises(OtherFormat) as caught:
        DataManifest.load(tmp_path)
    assert caught.value.stated == FORMAT_VERSION + 1 and DataManifest.read(tmp_path) is None
    (tmp_path / "manifest.json").write_text(json.dumps({**raw, "splits": []}))
    with pytest.raises(ValueError, match="manifest.json: splits"):
        DataManifest.load(tmp_path)
    assert DataManifest.read(tmp_path / "missing") is None


def test_the_summary_table_says_what_the_folder_holds(manifest):
    lines = summary_table(manifest).splitlines()
    assert lines[0].split() == ["split", "pairs", "de", "mean/max", "en", "mean/max"]
    train = manifest.splits["train"]
    assert lines[1].split()[:2] == ["train", str(train.pairs)]
    assert f"{train.src_len.mean:.1f} / {train.src_len.max}" in lines[1]
    assert f"vocab (sentencepiece) (joint): de {manifest.vocab_size.src}, en {manifest.vocab_size.tgt}" in lines
    assert any(line.startswith("OOV rate on val: de ") for line in lines)
    assert not any("dropped" in line or "<unk>" in line for line in lines)
    dropped = dataclasses.replace(manifest, dropped=Dropped(2, 3), tokenizer_from={"from": "published"})
    dropped = dataclasses.replace(
        dropped, splits={**manifest.splits, "train": dataclasses.replace(train, unk_rate=Rates(0.01, 0.002))}
    )
    table = summary_table(dropped)
    assert "dropped from train: 2 empty, 3 longer than data.train_max_len" in table
    assert unknown_line(Rates(0.01, 0.002), ("de", "en")) in table
    assert unknown_line(Rates(0.01, 0.002), ("de", "en")) == (
        "<unk> rate on train (the parent's tokenizers): de 1.00%, en 0.20% of the tokens"
    )
