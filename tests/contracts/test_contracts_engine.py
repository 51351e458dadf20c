"""contracts/engine.py: an export format's engine, one seams.ENGINES entry: how its folders are opened
and, when its exports keep trainable weights, how they are read back as a checkpoint."""

from __future__ import annotations

from transformer_cli.contracts.engine import Engine
from transformer_cli.seams import ENGINES


def test_tfms_engines_open_and_only_those_that_keep_weights_read_back():
    engines = {name: ENGINES[name] for name in ("torch", "transformers", "ctranslate2")}
    assert all(isinstance(e, Engine) and callable(e.open) for e in engines.values())
    assert {name for name, e in engines.items() if e.read_checkpoint is not None} == {"transformers"}
