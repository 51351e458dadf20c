"""export/options.py: Ct2Options, export.options of the CTranslate2 format: its quantization
read and checked where a config is loaded (export.options, --set), without importing
ctranslate2."""

from __future__ import annotations

import pytest
from helpers import modules_after_loading

from transformer_cli.config_loading import load_config
from transformer_cli.config_values import ConfigError
from transformer_cli.errors import UsageError
from transformer_cli.export.engine import QUANTIZATIONS
from transformer_cli.export.options import Ct2Options
from transformer_cli.seams import EXPORTERS


def test_the_quantization_is_one_ctranslate2_has():
    assert Ct2Options().quantization == "none"
    assert all(Ct2Options(quantization=q).quantization == q for q in QUANTIZATIONS)
    with pytest.raises(ConfigError, match=r"export.options.quantization must be one of none, int8, .*\(got 'int4'\)"):
        Ct2Options(quantization="int4")
    assert EXPORTERS.options("ctranslate2", {"quantization": "int16"}) == Ct2Options("int16")


def test_a_config_gives_them_and_its_mistakes_name_the_key(tmp_path):
    cfg = load_config("tiny.yaml", ["export.format=ctranslate2", "export.options.quantization=int8"])
    assert cfg.export.options == {"quantization": "int8"}
    with pytest.raises(UsageError, match=r"--set export.options.quantisation=int8: .*unknown key"):
        load_config("tiny.yaml", ["export.format=ctranslate2", "export.options.quantisation=int8"])


def test_reading_them_imports_no_ctranslate2():
    assert modules_after_loading(["export.options.quantization=int8"], "ctranslate2") == [False]
