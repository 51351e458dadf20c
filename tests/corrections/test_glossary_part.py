"""corrections/glossary_part.py: decode.glossary's terms as a part of the training data, a pair
each, mixed in corrections.glossary_weight times an epoch; none at weight 0; a changed glossary
encodes its part again and nothing else."""

from __future__ import annotations

import logging

from helpers import write_config

from transformer_cli.config_loading import load_config
from transformer_cli.corrections.glossary_part import PART, glossary_part
from transformer_cli.training.run_data import data_identity, prepare_run_data, training_split


def test_the_glossarys_terms_are_a_part_weighted_in_the_mix(tmp_path, corpus_dir, caplog) -> None:
    terms = tmp_path / "terms.tsv"
    terms.write_text("Ball\tflower\nein buch\ta book\n", encoding="utf-8")
    path = write_config(
        tmp_path / "small.yaml",
        tmp_path,
        corpus_dir,
        decode={"glossary": str(terms)},
        corrections={"glossary_weight": 3},
    )
    cfg = load_config(str(path))
    with caplog.at_level(logging.INFO, logger="tfm"):
        prepared, _ = prepare_run_data(cfg)
        mixed = training_split(cfg, prepared)
    assert f"glossary: 2 terms of file {terms} (x3 an epoch)" in caplog.text
    assert "2 glossary pairs x3" in caplog.text
    assert prepared.manifest.parts[PART].pairs == 2 and len(mixed) == 300 + 3 * 2
    assert {mixed.lines(i) for i in range(300, 306)} == {("Ball", "flower"), ("ein buch", "a book")}
    terms.write_text("Ball\tflower\nein buch\ta book\nHut\tcap\n", encoding="utf-8")
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="tfm"):
        again, _ = prepare_run_data(cfg)
    assert again.manifest.parts[PART].pairs == 3
    assert f"{PART}: 1 new pairs encoded, 2 kept as they were" in caplog.text  # the new term alone
    assert "pairs encoded" not in caplog.text.replace(f"{PART}: 1 new pairs encoded", "")
    assert data_identity(cfg, again) != data_identity(load_config(str(path), ["corrections.glossary_weight=1"]), again)


def test_no_glossary_or_weight_0_is_no_part(tmp_path, corpus_dir) -> None:
    terms = tmp_path / "terms.tsv"
    terms.write_text("Ball\tflower\n", encoding="utf-8")
    path = write_config(tmp_path / "small.yaml", tmp_path, corpus_dir, decode={"glossary": str(terms)})
    assert glossary_part(load_config(str(path))) is None  # weight 0 by default: decode time only
    assert glossary_part(load_config(str(write_config(tmp_path / "plain.yaml", tmp_path, corpus_dir)))) is None


def test_a_stores_terms_join_the_files_over_them_and_a_new_one_is_encoded_alone(tmp_path, corpus_dir, caplog) -> None:
    from transformer_cli.config_corrections import CorrectionsConfig
    from transformer_cli.corrections.guards import guarded
    from transformer_cli.corrections.store import TERMS, Correction, CorrectionStore

    terms, store = tmp_path / "terms.tsv", tmp_path / "store"
    terms.write_text("Ball\tflower\nein buch\ta book\n", encoding="utf-8")
    path = write_config(
        tmp_path / "small.yaml",
        tmp_path,
        corpus_dir,
        decode={"glossary": str(terms)},
        corrections={"glossary_weight": 2, "store": str(store)},
    )
    cfg = load_config(str(path))
    check = guarded(CorrectionsConfig(store=str(store)), terms=True)
    CorrectionStore(store, TERMS).add([Correction("BALL", "blossom")], check)
    with caplog.at_level(logging.INFO, logger="tfm"):
        prepared, _ = prepare_run_data(cfg)
        mixed = training_split(cfg, prepared)
    assert f"glossary: 2 terms of file {terms} and store {store} (x2 an epoch)" in caplog.text
    assert {mixed.lines(i) for i in range(300, 304)} == {("BALL", "blossom"), ("ein buch", "a book")}
    CorrectionStore(store, TERMS).add([Correction("Hut", "cap")], check)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="tfm"):
        again, _ = prepare_run_data(cfg)
    assert again.manifest.parts[PART].pairs == 3
    assert f"{PART}: 1 new pairs encoded, 2 kept as they were" in caplog.text
