"""export/engine.py: CTranslate2 as an optional dependency: its weight types by
--quantization, the folder that holds a CTranslate2 model, and whether its int8 kernels lose
accuracy on this CPU (x86 without VNNI through oneDNN). (ctranslate2 missing: test_extras.py.)"""

from __future__ import annotations

import sys

import pytest

from transformer_cli.errors import UsageError
from transformer_cli.export import engine
from transformer_cli.export.engine import (
    QUANTIZATIONS,
    import_ctranslate2,
    int8_loses_accuracy_here,
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


@pytest.mark.parametrize(
    "machine, vendor, flags, mkl, loses",
    [
        ("x86_64", "AuthenticAMD", {"avx2"}, None, True),  # oneDNN without VNNI: the 12.7 BLEU loss
        ("x86_64", "AuthenticAMD", {"avx2"}, "1", False),  # MKL asked for
        ("x86_64", "AuthenticAMD", {"avx2", "avx512_vnni"}, None, False),
        ("x86_64", "AuthenticAMD", {"avx_vnni"}, None, False),
        ("x86_64", "GenuineIntel", {"avx2"}, None, False),  # MKL by default on Intel
        ("x86_64", "GenuineIntel", {"avx2"}, "0", True),
        ("aarch64", "", set(), None, False),
    ],
)
def test_int8_is_said_to_lose_accuracy_only_on_onednn_without_vnni(monkeypatch, machine, vendor, flags, mkl, loses):
    monkeypatch.setattr(engine.platform, "machine", lambda: machine)
    monkeypatch.setattr(engine, "_cpu_info", lambda: (vendor, flags))
    if mkl is None:
        monkeypatch.delenv("CT2_USE_MKL", raising=False)
    else:
        monkeypatch.setenv("CT2_USE_MKL", mkl)
    assert int8_loses_accuracy_here() is loses


def test_this_machines_cpu_is_read_from_proc():
    vendor, flags = engine._cpu_info()
    if sys.platform == "linux" and engine.platform.machine() == "x86_64":
        assert vendor and {"sse2"} <= flags
    assert isinstance(int8_loses_accuracy_here(), bool)


def test_ctranslate2_is_imported_or_named_as_an_extra(monkeypatch):
    assert import_ctranslate2("tfm export").__name__ == "ctranslate2"
    monkeypatch.setitem(sys.modules, "ctranslate2", None)  # an import of it fails, as when missing
    with pytest.raises(UsageError, match=r"^tfm export needs the ctranslate2 extra: pip install"):
        import_ctranslate2("tfm export")
