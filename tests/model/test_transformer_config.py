"""model/transformer_config.py: the Transformer's `model:` keys, read and checked without torch:
its checks across keys (heads dividing the width, an even width for sinusoids, one vocabulary
for shared embeddings, learned positions long enough for the training pairs), each naming its
keys, the culprit first."""

from __future__ import annotations

import subprocess
import sys

import pytest

from transformer_cli.config import Config, DataConfig, TokenizerConfig
from transformer_cli.config_values import ConfigError, checks_deferred
from transformer_cli.model.transformer_config import TransformerConfig


def checked(model: TransformerConfig, **sections) -> None:
    with checks_deferred():
        cfg = Config(model=model, **sections)
    model.check(cfg)


@pytest.mark.parametrize(
    "model, sections, message, keys",
    [
        (TransformerConfig(d_model=64, n_heads=6), {}, "model.n_heads=6 must divide model.d_model=64", None),
        (
            TransformerConfig(d_model=63, n_heads=7),
            {},
            "model.d_model=63 must be even for sinusoidal positions",
            ("model.d_model", "model.positional"),
        ),
        (
            TransformerConfig(share_embeddings=True),
            {"tokenizer": TokenizerConfig(kind="spacy")},
            "model.share_embeddings needs a joint vocabulary",
            ("model.share_embeddings", "tokenizer.kind", "tokenizer.joint"),
        ),
        (
            TransformerConfig(share_embeddings=True),
            {"tokenizer": TokenizerConfig(joint=False)},
            "model.share_embeddings needs a joint vocabulary",
            None,
        ),
        (
            TransformerConfig(positional="learned", max_len=50),
            {"data": DataConfig(train_max_len=50)},
            "model.max_len=50 must be >= data.train_max_len + 2 = 52 with learned positions",
            ("model.max_len", "data.train_max_len", "model.positional"),
        ),
    ],
)
def test_each_check_names_its_keys(model, sections, message, keys):
    with pytest.raises(ConfigError) as caught:
        checked(model, **sections)
    assert str(caught.value).startswith(message)
    assert caught.value.keys[0].startswith("model.")
    if keys is not None:
        assert caught.value.keys == keys


def test_what_passes_the_checks():
    checked(TransformerConfig(d_model=63, n_heads=7, positional="learned"))  # odd: fine when learned
    checked(TransformerConfig(share_embeddings=True), tokenizer=TokenizerConfig(joint=True))
    checked(TransformerConfig(positional="learned", max_len=52), data=DataConfig(train_max_len=50))


def test_its_fields_have_their_bounds_and_choices():
    with pytest.raises(ConfigError, match=r"model.n_heads=0 is out of range: must be >= 1"):
        TransformerConfig(n_heads=0)
    with pytest.raises(ConfigError, match=r"model.activation must be one of 'relu', 'gelu', 'swish'"):
        TransformerConfig(activation="tanh")
    with pytest.raises(ConfigError, match=r"model.sinusoid_layout must be one of 'interleaved', 'halves'"):
        TransformerConfig(sinusoid_layout="rows")
    cfg = TransformerConfig()
    assert (cfg.architecture, cfg.norm, cfg.positional, cfg.scale_embeddings) == (
        "transformer",
        "post",
        "sinusoidal",
        True,
    )


def test_reading_it_imports_no_torch():
    code = "import sys; import transformer_cli.model.transformer_config; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
