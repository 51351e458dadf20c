"""config_checks.py: the checks across keys (`validate`), each a ConfigError holding its keys,
the culprit first (so that the loader can name where each was set), and `check_choices`:
every name a registry gives is known, with its entry's options."""

from __future__ import annotations

from typing import Any

import pytest
from helpers import config_from_dict

from transformer_cli.config import Config
from transformer_cli.config_checks import check_choices, validate
from transformer_cli.config_values import ConfigError, checks_deferred


def deferred(raw: dict[str, Any]) -> Config:
    """The config of `raw`, built without the checks across keys (as the loader builds it)."""
    with checks_deferred():
        return config_from_dict(raw)


@pytest.mark.parametrize(
    "raw, message, keys",
    [
        (
            {"tokenizer": {"kind": "spacy", "sampling": 0.1}},
            "tokenizer.sampling needs a tokenizer that samples segmentations",
            ("tokenizer.sampling", "tokenizer.kind"),
        ),
        (
            {"train": {"transform_options": {"source_noise": {"lowercase": 0.6, "uppercase": 0.5}}}},
            "train.transform_options.source_noise.lowercase + uppercase must be at most 1",
            ("train.transform_options.source_noise.lowercase", "train.transform_options.source_noise.uppercase"),
        ),
        (
            {"train": {"batch_size": None, "batch_tokens": None}},
            "set train.batch_size (sentences) or train.batch_tokens",
            ("train.batch_size", "train.batch_tokens"),
        ),
        (
            {"train": {"batch_size": 32, "batch_tokens": 4000}},
            "train.batch_size and train.batch_tokens are exclusive",
            ("train.batch_size", "train.batch_tokens"),
        ),
        (
            {"train": {"optimizer_options": {"betas": [0.9]}}},
            "train.optimizer_options.betas must be two numbers in [0, 1) (got [0.9])",
            ("train.optimizer_options.betas",),
        ),
        (
            {"train": {"schedule": "inverse_sqrt", "schedule_options": {"warmup_steps": 0}}},
            "train.schedule_options.warmup_steps=0 is out of range: must be >= 1",
            ("train.schedule_options.warmup_steps",),
        ),
        (
            {"decode": {"beam_size": 2, "n_best": 3}},
            "decode.n_best=3 must be <= decode.beam_size=2",
            ("decode.n_best", "decode.beam_size"),
        ),
        (
            {"decode": {"strategy": "sample", "beam_size": 4, "n_best": 2}},
            "decode.strategy: sample returns 1 translation a source: set decode.n_best to 1 or fewer",
            ("decode.n_best", "decode.strategy"),
        ),
        (
            {"decode": {"ensemble": ["a.pt", "b.pt"], "ensemble_weights": [1.0]}},
            "decode.ensemble_weights must be one positive number per model of decode.ensemble (2)",
            ("decode.ensemble_weights", "decode.ensemble"),
        ),
        (
            {"data": {"src_lang": "de", "tgt_lang": "de"}},
            "data.src_lang and data.tgt_lang are both 'de'",
            ("data.src_lang", "data.tgt_lang"),
        ),
        ({"train": {"init_from": "  "}}, "train.init_from must name a checkpoint file", ("train.init_from",)),
        ({"name": "a/b"}, "name='a/b' must be a plain directory name", ("name",)),
        ({"name": ".hidden"}, "name='.hidden' must be a plain directory name", ("name",)),
        ({"model": {"n_heads": 7}}, "model.n_heads=7 must divide model.d_model=256", None),
    ],
)
def test_each_check_across_keys_names_its_keys_culprit_first(raw, message, keys):
    cfg = deferred(raw)
    with pytest.raises(ConfigError) as caught:
        validate(cfg)
    assert str(caught.value).startswith(message)
    if keys is not None:
        assert caught.value.keys == keys
    with pytest.raises(ConfigError):  # and a config built in Python is checked the same way
        config_from_dict(raw)


def test_synthetic_pairs_need_their_teachers_one_weight_each():
    forward = {"forward_translation": {"text": ["parallel"]}}
    with pytest.raises(ConfigError) as caught:
        validate(deferred({"synthetic": forward}))
    assert caught.value.keys == ("synthetic.forward_translation.teachers",)
    teachers = {"forward_translation": {"text": ["parallel"], "teachers": ["t.pt"], "weights": [1.0, 1.0]}}
    one_each = r"forward_translation.weights must be one number per teacher \(1\)"
    with pytest.raises(ConfigError, match=one_each) as caught:
        validate(deferred({"synthetic": teachers}))
    assert caught.value.keys == ("synthetic.forward_translation.weights", "synthetic.forward_translation.teachers")
    validate(deferred({"synthetic": {"forward_translation": {"text": ["parallel"], "teachers": ["t.pt"]}}}))


def test_a_monolingual_corpus_name_is_checked_when_the_config_loads(tmp_path, monkeypatch):
    """A bare word in synthetic.*.text that is no file here is a corpus name: a typo is refused
    at load time with the known names; files, folders and paths are left to `tfm synthesize`."""
    monkeypatch.chdir(tmp_path)
    typo = {"back_translation": {"text": ["multi30k-tsk2"]}}
    with pytest.raises(
        ConfigError, match=r"unknown monolingual corpus 'multi30k-tsk2' \(known: multi30k-task2, parallel\)"
    ):
        validate(deferred({"synthetic": typo}))
    (tmp_path / "captions").mkdir()  # a folder of that name here: text to read, not a name
    for entries in (["multi30k-task2", "parallel", "captions"], ["later/mono.en", "mono.en"]):
        validate(deferred({"synthetic": {"back_translation": {"text": entries}}}))
    teachers = {"text": ["multi30k-tsk2"], "teachers": ["t.pt"]}
    with pytest.raises(ConfigError) as caught:
        validate(deferred({"synthetic": {"forward_translation": teachers}}))
    assert caught.value.keys == ("synthetic.forward_translation.text",)


def test_every_name_a_registry_gives_is_known_and_its_options_are_its_settings():
    validate(Config())
    for raw, message, key in [
        (
            {"train": {"optimizer": "sgd"}},
            "train.optimizer: unknown optimizer 'sgd' (known: adam, adamw",
            "train.optimizer",
        ),
        ({"decode": {"strategy": "nucleus"}}, "decode.strategy: unknown search strategy 'nucleus'", "decode.strategy"),
        ({"train": {"transforms": ["source_noise", "typo"]}}, "train.transforms: unknown transform 'typo'", None),
        ({"export": {"format": "onnx"}}, "export.format: unknown export format 'onnx'", "export.format"),
        ({"data": {"corpus": "wmt"}}, "data.corpus: unknown parallel corpus 'wmt'", "data.corpus"),
    ]:
        with pytest.raises(ConfigError) as caught:
            check_choices(deferred(raw))
        assert str(caught.value).startswith(message), str(caught.value)
        if key is not None:
            assert caught.value.keys[0] == key
    # an entry's own keys are checked by its settings: CTranslate2's export options
    with pytest.raises(ConfigError, match="export.options"):
        check_choices(deferred({"export": {"format": "ctranslate2", "options": {"quantisation": "int8"}}}))
    check_choices(deferred({"export": {"format": "ctranslate2", "options": {"quantization": "int8"}}}))
