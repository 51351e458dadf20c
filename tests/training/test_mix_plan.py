"""training/mix_plan.py: the training mix declared once from the config (sources, weights,
marks: SourceMark, no seams.Transform): the batches, the run's identity and the log line read
it, and the vocabulary reserves exactly the tokens its marks write."""

from __future__ import annotations

import logging
import time
from types import SimpleNamespace

import pytest
from helpers import sentence_pairs, write_config

from transformer_cli import seams
from transformer_cli.config_loading import load_config
from transformer_cli.corrections.store import Correction, CorrectionStore
from transformer_cli.data.parts import PartInput
from transformer_cli.data.preprocess import prepare
from transformer_cli.errors import UsageError
from transformer_cli.tokenizers.text_marks import BACK_TRANSLATION_TAG, FILLER, FORWARD_TRANSLATION_TAG
from transformer_cli.training import mix_plan as mix_plan_module
from transformer_cli.training.mix_plan import PlannedSource, Prefix, SourceMark, WordNoise, mix_plan
from transformer_cli.training.run_data import data_identity, prepare_run_data, training_split


def test_the_plan_declares_each_source_with_its_weight_and_marks(tmp_path, corpus_dir):
    synthetic = {
        "back_translation": {"text": ["parallel"], "search": "noised_beam", "weight": 3},
        "forward_translation": {"text": ["parallel"], "teachers": ["t.pt"], "tag": True},
        "real_weight": 2,
    }
    corrections = {"store": str(tmp_path / "store"), "weight": 5}
    path = write_config(tmp_path / "c.yaml", tmp_path, corpus_dir, synthetic=synthetic, corrections=corrections)
    plan = mix_plan(load_config(str(path)))
    assert plan.sources == (
        PlannedSource("train", 2),
        PlannedSource("back_translation", 3, (Prefix(BACK_TRANSLATION_TAG), WordNoise())),
        PlannedSource("forward_translation", 1, (Prefix(FORWARD_TRANSLATION_TAG),)),
        PlannedSource("corrections", 5),
    )
    assert plan.specials() == (BACK_TRANSLATION_TAG, FILLER, FORWARD_TRANSLATION_TAG)
    only = load_config(str(write_config(tmp_path / "o.yaml", tmp_path, corpus_dir, corrections=corrections)))
    assert mix_plan(only).sources == (PlannedSource("train", 1), PlannedSource("corrections", 5))
    assert mix_plan(only).specials() == ()  # no mark in use: nothing reserved
    marks: tuple[SourceMark, ...] = plan.sources[1].marks  # a source's marks: SourceMark, not seams.Transform
    assert [m.specials() for m in marks] == [(BACK_TRANSLATION_TAG,), (FILLER,)] and plan.sources[1].tag
    assert not hasattr(mix_plan_module, "Transform") and hasattr(seams, "Transform")  # one protocol by that name


def test_real_upsample_is_the_real_pairs_weight_by_its_old_name(tmp_path, corpus_dir, caplog):
    """synthetic.real_weight weighs the real pairs; synthetic.real_upsample, its old name, reads
    as it with one warning naming its line: the same plan, so the same run identity as before
    (the plan reads the new key alone); the two given together are refused, naming both."""
    back = {"back_translation": {"text": ["parallel"], "tag": False}}
    new = write_config(tmp_path / "new.yaml", tmp_path, corpus_dir, synthetic={**back, "real_weight": 3})
    old = write_config(tmp_path / "old.yaml", tmp_path, corpus_dir, synthetic={**back, "real_upsample": 3})
    line = next(
        i for i, text in enumerate(old.read_text().splitlines(), 1) if text.strip().startswith("real_upsample:")
    )
    with caplog.at_level(logging.WARNING):
        was = load_config(str(old))
    assert [r.getMessage() for r in caplog.records] == [
        f"warning: {old}:{line}: synthetic.real_upsample is now synthetic.real_weight "
        "(the old name is read until a later release)"
    ]
    assert (
        mix_plan(was)
        == mix_plan(load_config(str(new)))
        == mix_plan(load_config(str(new), ["synthetic.real_upsample=3"]))
    )
    prepared = SimpleNamespace(manifest=SimpleNamespace(parts={"back_translation": None}))
    assert mix_plan(was).identity(prepared) == {"train": 3, "back_translation": [1, None]}  # as it was
    both = write_config(tmp_path / "both.yaml", tmp_path, corpus_dir, synthetic={"real_upsample": 2, "real_weight": 3})
    with pytest.raises(
        UsageError,
        match="synthetic.real_upsample is the old name of synthetic.real_weight: give synthetic.real_weight alone",
    ):
        load_config(str(both))


def test_a_directions_weight_repeats_its_pairs_and_makes_another_run_not_other_data(tmp_path, corpus_dir, caplog):
    synthetic = {"back_translation": {"text": ["parallel"]}}
    path = write_config(tmp_path / "w.yaml", tmp_path, corpus_dir, synthetic=synthetic)
    cfg = load_config(str(path))
    made = tmp_path / "made"
    made.mkdir()
    pairs = sentence_pairs(7, seed=3)
    paths = (made / "back_translation.de", made / "back_translation.en")
    for side, file in enumerate(paths):
        file.write_text("".join(f"{p[side]}\n" for p in pairs), encoding="utf-8")
    prepared, _ = prepare(cfg, parts=[PartInput("back_translation", paths)], reserved=mix_plan(cfg).specials())
    real = len(prepared.split("train"))
    heavier = load_config(str(path), ["synthetic.back_translation.weight=3"])
    with caplog.at_level(logging.INFO, logger="tfm"):
        once, thrice = training_split(cfg, prepared), training_split(heavier, prepared)
    assert (len(once), len(thrice)) == (real + 7, real + 3 * 7)
    assert thrice.lines(real + 7) == thrice.lines(real) == (f"{BACK_TRANSLATION_TAG} {pairs[0][0]}", pairs[0][1])
    assert f"{real} train pairs x1, 7 back_translation pairs x3 (tagged); {real + 21} pairs an epoch" in caplog.text
    assert data_identity(heavier, prepared) != data_identity(cfg, prepared)


def test_a_corrections_only_configs_first_correction_encodes_that_pair_alone(tmp_path, corpus_dir, caplog):
    store = CorrectionStore(tmp_path / "store")
    path = write_config(tmp_path / "k.yaml", tmp_path, corpus_dir, corrections={"store": str(tmp_path / "store")})
    cfg = load_config(str(path))
    before, _ = prepare_run_data(cfg)
    shards = {p: p.stat().st_ino for p in cfg.data_dir.glob("train.*.bin")}
    store.add([Correction("Ein Hund rennt .", "A dog runs .", time=time.time())])
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="tfm"):
        after, rebuilt = prepare_run_data(cfg)
    assert rebuilt and "corrections: 1 pairs encoded" in caplog.text
    assert "rebuilding" not in caplog.text and after.manifest.fingerprint == before.manifest.fingerprint
    assert {p: p.stat().st_ino for p in cfg.data_dir.glob("train.*.bin")} == shards  # the corpus untouched
    assert after.tokenizers.vocabulary_digest() == before.tokenizers.vocabulary_digest()


def test_a_source_gets_only_its_own_share_of_the_batch_transforms(tmp_path, corpus_dir):
    """corrections.transforms: [] keeps the corrections as their translators wrote them while the
    real pairs' sources are noised (here: every one lowercased); a name not in train.transforms
    is refused where the config is loaded."""
    from transformer_cli.data.augment import Augmentation

    store = CorrectionStore(tmp_path / "store")
    store.add([Correction("Ein Hund rennt .", "A dog runs .", time=time.time())])
    train = {"transforms": ["source_noise"], "transform_options": {"source_noise": {"lowercase": 1.0}}}
    corrections = {"store": str(tmp_path / "store"), "weight": 1, "transforms": []}
    cfg = load_config(
        str(write_config(tmp_path / "t.yaml", tmp_path, corpus_dir, train=train, corrections=corrections))
    )
    plan = mix_plan(cfg)
    assert plan.batch_transforms() == {"corrections": ()}
    prepared, _ = prepare_run_data(cfg)
    split = training_split(cfg, prepared)
    src = prepared.tokenizers.src
    augmented = Augmentation.from_config(cfg, prepared.tokenizers, plan.batch_transforms())
    pairs = augmented.pairs(split, range(len(split)), seed=5)
    real, correction = split.lines(0)[0], split.lines(len(split) - 1)[0]
    assert split.source(0) == "train" and split.source(len(split) - 1) == "corrections"
    assert list(pairs[0][0]) == src.encode_batch([real.lower()])[0] != src.encode_batch([real])[0]
    assert list(pairs[-1][0]) == src.encode_batch([correction])[0]  # as written, capital E kept
    bad = write_config(tmp_path / "b.yaml", tmp_path, corpus_dir, train=train, corrections={"transforms": ["x"]})
    with pytest.raises(UsageError, match=r"corrections.transforms: x not among train.transforms \(source_noise\)"):
        load_config(str(bad))
