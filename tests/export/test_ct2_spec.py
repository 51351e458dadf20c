"""export/ct2_spec.py: every architecture the config schema allows becomes a CTranslate2 spec
(or would be refused in one line, every reason at once); vocabularies CTranslate2 cannot map
are refused."""

from __future__ import annotations

import dataclasses
import itertools
from typing import Literal, get_args, get_origin, get_type_hints

import pytest

from transformer_cli.checkpoint import Checkpoint
from transformer_cli.errors import UsageError
from transformer_cli.export.ct2_spec import build_spec, refusals, vocabulary
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
