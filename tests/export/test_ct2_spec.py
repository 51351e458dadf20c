"""Every architecture the config schema allows exports (or would be refused in one line);
vocabularies CTranslate2 cannot map are refused; export folders are written and read safely."""

from __future__ import annotations

import dataclasses
import itertools
import shutil
from typing import Literal, get_args, get_origin, get_type_hints

import ctranslate2
import pytest
from helpers import untrained_checkpoint

from transformer_cli.checkpoint import Checkpoint, CheckpointError
from transformer_cli.errors import TfmError, UsageError
from transformer_cli.export.bundle import export_checkpoint
from transformer_cli.export.ct2_spec import build_spec, refusals, vocabulary
from transformer_cli.export.ct2_translator import Ct2Translator
from transformer_cli.export.manifest import MANIFEST
from transformer_cli.inference.translate import model_from_checkpoint
from transformer_cli.model.transformer_config import TransformerConfig
from transformer_cli.tokenizers.vocab import SPECIALS, Vocab
from transformer_cli.tokenizers.word import WordTokenizer


def schema_choices() -> dict[str, tuple]:
    """Every TransformerConfig field with a closed set of values (Literal or bool) and its values."""
    hints = get_type_hints(TransformerConfig)
    return {
        name: (get_args(tp) if get_origin(tp) is Literal else (False, True))
        for name, tp in hints.items()
        if get_origin(tp) is Literal or tp is bool
    }


def test_every_architecture_of_the_schema_exports(models):
    from transformer_cli.model.transformer import Seq2SeqTransformer

    joint = model_from_checkpoint(Checkpoint.read(models["subword-post"]["checkpoint"]))[1]
    choices = schema_choices()
    assert {
        "activation",
        "positional",
        "norm",
        "tie_output",
        "share_embeddings",
        "scale_embeddings",
        "output_bias",
        "sinusoid_layout",
    } <= set(choices)
    for values in itertools.product(*choices.values()):
        cfg = TransformerConfig(
            **dict(zip(choices, values)),
            d_model=16,
            n_heads=2,
            d_ff=32,
            n_encoder_layers=1,
            n_decoder_layers=2,
            max_len=16,
        )
        assert refusals("transformer", cfg) == [], cfg
        model = Seq2SeqTransformer(cfg, joint.src.vocab_size, joint.tgt.vocab_size)
        build_spec(model, joint)  # raises if CTranslate2's spec does not validate


def _unchecked(**values) -> TransformerConfig:
    """A model section holding values this schema refuses (as a family registered from outside
    may hold its own)."""
    cfg = TransformerConfig()
    for key, value in values.items():
        setattr(cfg, key, value)
    return cfg


def test_what_ctranslate2_cannot_express_is_refused_in_one_line():
    cfg = TransformerConfig()
    assert refusals("transformer", _unchecked(activation="swiglu")) == [
        "model.activation='swiglu' has no CTranslate2 equivalent"
    ]
    both = refusals("transformer", _unchecked(positional="rotary", norm="rms"))
    assert both == [
        "model.norm='rms' has no CTranslate2 equivalent",  # every one at once
        "model.positional='rotary' has no CTranslate2 equivalent",
    ]
    assert refusals("mamba", cfg) == [
        "model.architecture='mamba' is not one the CTranslate2 exporter converts (transformer)"
    ]

    @dataclasses.dataclass
    class Later(TransformerConfig):  # an option a later tfm adds: refused until the exporter knows it,
        qk_norm: bool = False  # unless it keeps its default (the behaviour before it existed)

    assert refusals("transformer", Later()) == []
    [reason] = refusals("transformer", Later(qk_norm=True))
    assert reason.startswith("model.qk_norm=True is not known to the CTranslate2 exporter")


def test_vocabularies_ctranslate2_cannot_map_are_refused():
    twice = WordTokenizer("en", Vocab([*SPECIALS, "a", "b", "a"]), False, (), ())
    with pytest.raises(UsageError, match=r"the target vocabulary holds 'a' twice \(again at id 6\)"):
        vocabulary(twice, "target")
    once = WordTokenizer("en", Vocab([*SPECIALS, "a", "b"]), False, (), ())
    assert vocabulary(once, "source") == [*SPECIALS, "a", "b"]


def test_export_folders_are_replaced_whole_and_verified(models, tmp_path):
    checkpoint = models["words-post"]["checkpoint"]
    target = tmp_path / "export"
    export_checkpoint(checkpoint, target, "int8")
    first = (target / "model.bin").read_bytes()
    export_checkpoint(checkpoint, target, "int16")  # an earlier export is replaced
    assert (target / "model.bin").read_bytes() != first
    assert sorted(p.name for p in tmp_path.iterdir()) == ["export"]  # nothing left beside it

    other = tmp_path / "notes"
    other.mkdir()
    (other / "keep.txt").write_text("mine")
    with pytest.raises(UsageError, match="exists and is not a tfm export"):
        export_checkpoint(checkpoint, other)
    with pytest.raises(UsageError, match="--quantization must be one of none, int8"):
        export_checkpoint(checkpoint, tmp_path / "new", "int4")
    assert (other / "keep.txt").read_text() == "mine" and not (tmp_path / "new").exists()
    with pytest.raises(UsageError, match=r"runs on auto, cpu or cuda \(got 'mps'\)"):
        Ct2Translator(target, "mps")
    if ctranslate2.get_cuda_device_count() == 0:
        with pytest.raises(UsageError, match="no CUDA GPU is visible to CTranslate2"):
            Ct2Translator(target, "cuda")

    damaged = tmp_path / "damaged"
    shutil.copytree(target, damaged)
    data = bytearray((damaged / "model.bin").read_bytes())
    data[len(data) // 2] ^= 1
    (damaged / "model.bin").write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="model.bin does not match its sha256"):
        Ct2Translator(damaged, "cpu")
    (damaged / MANIFEST).write_text("{}")
    with pytest.raises(CheckpointError, match="is not a tfm export"):
        Ct2Translator(damaged, "cpu")


class _EngineWithoutCuBLAS:
    """What ctranslate2.Translator on a CUDA 13 machine did at its first translation (an H200,
    CTranslate2 4.8.5: its wheels load CUDA 12's cuBLAS); no GPU is needed to check the line."""

    def translate_batch(self, *args, **kwargs):
        raise RuntimeError("Library libcublas.so.12 is not found or cannot be loaded")


def test_a_cuda_library_missing_is_one_line_at_load_time(tmp_path):
    export_checkpoint(untrained_checkpoint(tmp_path / "untrained.pt"), tmp_path / "export")
    translator = Ct2Translator(tmp_path / "export", device="cpu")
    translator._check_cuda_libraries(ctranslate2.__version__)  # the real engine translates the token
    translator.engine = _EngineWithoutCuBLAS()
    with pytest.raises(TfmError) as refused:
        translator._check_cuda_libraries(ctranslate2.__version__)
    message = str(refused.value)
    assert "\n" not in message and "libcublas.so.12" in message and "--device cpu" in message
