"""export/engine.py: CTranslate2 as an optional dependency: its weight types by
--quantization and the folder that holds a CTranslate2 model. (ctranslate2 missing:
test_extras.py.)"""

from __future__ import annotations

import sys

import pytest

from transformer_cli.errors import UsageError
from transformer_cli.export.engine import (
    QUANTIZATIONS,
    import_ctranslate2,
    is_ct2_model_folder,
    weight_type,
)


def test_each_quantization_is_a_weight_type_and_others_are_refused():
    assert weight_type("none") == "float32" and weight_type("int8_float16") == "int8_float16"
    assert all(weight_type(q) == w for q, w in QUANTIZATIONS.items())
    with pytest.raises(UsageError, match=r"--quantization must be one of none, int8, .* \(got 'int4'\)"):
        weight_type("int4")


def test_a_ct2_model_folder_is_one_with_model_bin(tmp_path):
    assert not is_ct2_model_folder(tmp_path)
    (tmp_path / "model.bin").write_bytes(b"")
    assert is_ct2_model_folder(tmp_path) and not is_ct2_model_folder(tmp_path / "model.bin")


def test_ctranslate2_is_imported_or_named_as_an_extra(monkeypatch):
    assert import_ctranslate2("tfm export").__name__ == "ctranslate2"
    monkeypatch.setitem(sys.modules, "ctranslate2", None)  # an import of it fails, as when missing
    with pytest.raises(UsageError, match=r"^tfm export needs the ctranslate2 extra: pip install"):
        import_ctranslate2("tfm export")
