"""data/parts.py: sources of pairs beside the corpus, each its own split of the prepared folder,
encoded once: appended to when their files grow at the end, encoded whole when they change
otherwise, left alone when they are current; what they leave out is counted."""

from __future__ import annotations

import logging

import pytest
from helpers import sentence_pairs, write_config

from transformer_cli.config_loading import load_config
from transformer_cli.data.manifest import summary_table
from transformer_cli.data.parts import PartInput
from transformer_cli.data.prepared import Prepared, verify_folder
from transformer_cli.data.preprocess import prepare
from transformer_cli.errors import UsageError
from transformer_cli.tokenizers.text_marks import BACK_TRANSLATION_TAG, FILLER, MARKS


def _part(folder, name, pairs):
    paths = (folder / f"{name}.de", folder / f"{name}.en")
    for side, path in enumerate(paths):
        path.write_text("".join(f"{p[side]}\n" for p in pairs), encoding="utf-8")
    return PartInput(name, paths)


def _append(part, pairs):
    for side, path in enumerate(part.paths):
        with open(path, "a", encoding="utf-8") as f:
            f.write("".join(f"{p[side]}\n" for p in pairs))


def _ids(prepared, name):
    split = prepared.split(name)
    return [tuple(x.tolist() for x in split.pair(i)) for i in range(len(split))]


@pytest.fixture
def cfg(tmp_path, corpus_dir):
    return load_config(str(write_config(tmp_path / "small.yaml", tmp_path, corpus_dir)))


def test_a_grown_part_gets_its_new_pairs_appended_as_a_fresh_build_would_encode_them(tmp_path, cfg, caplog):
    made = tmp_path / "made"
    made.mkdir()
    part = _part(made, "back_translation", sentence_pairs(50, seed=5))
    first, rebuilt = prepare(cfg, parts=[part])
    assert rebuilt and first.manifest.parts["back_translation"].pairs == 50
    shard = cfg.data_dir / "back_translation.00000.src.bin"
    inode, train = shard.stat().st_ino, (cfg.data_dir / "train.00000.src.bin").stat().st_ino
    again, rebuilt = prepare(cfg, parts=[part])  # current: nothing done
    assert not rebuilt and again.manifest == first.manifest
    _append(part, sentence_pairs(7, seed=6))
    with caplog.at_level(logging.INFO, logger="tfm"):
        grown, rebuilt = prepare(cfg, parts=[part])
    assert rebuilt and "back_translation: 7 new pairs encoded, 50 kept as they were" in caplog.text
    assert shard.stat().st_ino == inode and (cfg.data_dir / "train.00000.src.bin").stat().st_ino == train
    assert grown.manifest.parts["back_translation"].pairs == 57 and grown.manifest.training_pairs == 300 + 57
    assert grown.tokenizers.vocabulary_digest() == first.tokenizers.vocabulary_digest()
    assert verify_folder(cfg.data_dir, grown.manifest, full=True) is None
    appended = _ids(grown, "back_translation")
    fresh, _ = prepare(cfg, force=True, parts=[part])
    assert _ids(fresh, "back_translation") == appended
    assert fresh.manifest.splits["back_translation"] == grown.manifest.splits["back_translation"]


def test_a_part_changed_before_its_end_is_encoded_whole_and_a_part_gone_is_dropped(tmp_path, cfg, caplog):
    made = tmp_path / "made"
    made.mkdir()
    pairs = sentence_pairs(30, seed=5)
    bt, ft = _part(made, "back_translation", pairs), _part(made, "forward_translation", pairs[:10])
    prepare(cfg, parts=[bt, ft])
    pairs[3] = ("Ein ganz anderer Satz .", "A wholly other sentence .")
    _part(made, "back_translation", pairs)
    with caplog.at_level(logging.INFO, logger="tfm"):
        changed, _ = prepare(cfg, parts=[bt, ft])
    assert "back_translation: its pairs changed before their end: encoding it whole" in caplog.text
    assert "forward_translation: 0 new pairs encoded, 10 kept as they were" in caplog.text
    assert changed.split("back_translation").lines(3) == pairs[3]
    alone, rebuilt = prepare(cfg, parts=[ft])
    assert rebuilt and set(alone.manifest.parts) == {"forward_translation"}
    assert not list(cfg.data_dir.glob("back_translation.*"))


def test_pairs_left_out_are_counted_and_misaligned_files_are_one_error(tmp_path, cfg, caplog):
    made = tmp_path / "made"
    made.mkdir()
    long = " ".join(["Hund"] * 60)
    part = _part(made, "forward_translation", [*sentence_pairs(20, seed=5), ("", "A dog ."), (long, long)])
    with caplog.at_level(logging.INFO, logger="tfm"):
        prepared, _ = prepare(cfg, parts=[part])
    said = "forward_translation: 20 pairs encoded (1 empty, 1 longer than data.train_max_len: left out)"
    assert said in caplog.text
    _append(part, [(long, long), ("Ein Hund .", "A dog .")])
    with caplog.at_level(logging.INFO, logger="tfm"):
        prepare(cfg, parts=[part])  # only what this encoding left out is said
    said = "1 new pairs encoded (1 longer than data.train_max_len: left out), 20 kept as they were"
    assert said in caplog.text
    prepared, _ = prepare(cfg, force=True, parts=[part])
    record = prepared.manifest.parts["forward_translation"]
    assert (record.pairs, record.empty, record.too_long) == (21, 1, 2)
    assert "dropped from forward_translation: 1 empty, 2 longer than data.train_max_len" in summary_table(
        prepared.manifest
    )
    with open(part.paths[0], "a", encoding="utf-8") as f:
        f.write("Eine Zeile zu viel .\n")
    with pytest.raises(UsageError, match="misaligned pairs: .*forward_translation.de and .*forward_translation.en"):
        prepare(cfg, parts=[part])


@pytest.mark.parametrize("kind", ["sentencepiece", "spacy"])
def test_the_reserved_marks_are_tokens_of_their_own_and_asking_for_another_refits(tmp_path, corpus_dir, kind, caplog):
    joint = kind == "sentencepiece"
    tokenizer = {"kind": kind, "vocab_size": 120, "joint": joint}
    model = {"share_embeddings": joint, "tie_output": True}
    path = write_config(tmp_path / "small.yaml", tmp_path, corpus_dir, tokenizer=tokenizer, model=model)
    cfg = load_config(str(path))
    made = tmp_path / "made"
    made.mkdir()
    parts = [_part(made, "back_translation", sentence_pairs(5, seed=5))]

    def tokens(prepared: Prepared) -> set[str]:
        src = prepared.tokenizers.src
        return {m for m in MARKS if len(ids := src.encode_batch([m])[0]) == 1 and m in src.id_to_token(ids)[0]}

    prepared, _ = prepare(cfg, parts=parts, reserved=(BACK_TRANSLATION_TAG,))
    assert tokens(prepared) == {BACK_TRANSLATION_TAG}  # what the mix writes, no more
    again, rebuilt = prepare(cfg, parts=parts)  # a tag turned off: the folder still serves
    assert not rebuilt and again.fingerprint == prepared.fingerprint
    with caplog.at_level(logging.INFO, logger="tfm"):
        noised, rebuilt = prepare(cfg, parts=parts, reserved=(BACK_TRANSLATION_TAG, FILLER))
    assert rebuilt and tokens(noised) == {BACK_TRANSLATION_TAG, FILLER}
    assert "its tokenizers lack 1 of the marks the training mix writes: rebuilding" in caplog.text
