"""data/freshness.py: whether a prepared folder is current: today's fingerprint or an earlier
version's (which counted tfm's three marks for every folder with parts), and a token of its own
in the folder's tokenizers for each mark the training mix writes."""

from __future__ import annotations

import dataclasses

from helpers import write_config

from transformer_cli.config_loading import load_config
from transformer_cli.data.freshness import LEGACY_MARKS, data_fingerprints, lacking_marks, still_current
from transformer_cli.data.preprocess import prepare
from transformer_cli.data.sources import fetch_corpus
from transformer_cli.tokenizers.text_marks import BACK_TRANSLATION_TAG, FILLER


def test_a_folder_an_earlier_version_fingerprinted_with_the_three_marks_is_still_current(tmp_path, corpus_dir):
    cfg = load_config(str(write_config(tmp_path / "f.yaml", tmp_path, corpus_dir)))
    prepared, _ = prepare(cfg, reserved=LEGACY_MARKS)
    files = fetch_corpus(cfg.data, str(corpus_dir))
    today, earlier = data_fingerprints(cfg, files)
    assert today != earlier and prepared.manifest.fingerprint == today
    as_before = dataclasses.replace(prepared.manifest, fingerprint=earlier)
    assert still_current(cfg.data_dir, as_before, (today, earlier), False, None, (BACK_TRANSLATION_TAG,))
    assert not still_current(cfg.data_dir, as_before, (today,), False, None, ())


def test_the_marks_a_folders_tokenizers_lack_are_counted(tmp_path, corpus_dir):
    cfg = load_config(str(write_config(tmp_path / "m.yaml", tmp_path, corpus_dir)))
    prepare(cfg, reserved=(BACK_TRANSLATION_TAG,))
    assert lacking_marks(cfg.data_dir, ()) == 0 and lacking_marks(cfg.data_dir, (BACK_TRANSLATION_TAG,)) == 0
    assert lacking_marks(cfg.data_dir, (BACK_TRANSLATION_TAG, FILLER)) == 1
    assert lacking_marks(tmp_path / "nowhere", (FILLER,)) == 1  # unreadable: verify_folder says why
