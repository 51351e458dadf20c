"""Four tiny models trained once per session (both tokenizer kinds x both norm placements,
covering learned/sinusoidal positions, shared/tied/separate embeddings, relu/gelu and unequal
stacks), each with its float32 and int8 CTranslate2 exports."""

from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Any

import pytest
from helpers import built_once, forks, write_config

SPACY = {"kind": "spacy", "lowercase": True, "min_freq": 1}
SUBWORD_SEPARATE = {"kind": "sentencepiece", "vocab_size": 100, "joint": False}
SMALL = {"d_model": 48, "n_heads": 4, "d_ff": 96}
VARIANTS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    # base.yaml's shape: joint SentencePiece, post-norm, sinusoidal, shared + tied embeddings
    "subword-post": ({}, SMALL),
    # separate SentencePiece models, pre-norm, learned positions, gelu, 2 encoder layers
    "subword-pre": (
        SUBWORD_SEPARATE,
        {
            **SMALL,
            "norm": "pre",
            "positional": "learned",
            "activation": "gelu",
            "n_encoder_layers": 2,
            "share_embeddings": False,
            "tie_output": False,
        },
    ),
    # seed.yaml's shape: spaCy words, post-norm, learned positions, nothing shared
    "words-post": (SPACY, {**SMALL, "positional": "learned", "share_embeddings": False, "tie_output": False}),
    # spaCy words, pre-norm, sinusoidal, output tied to the (separate) target embedding
    "words-pre": (SPACY, {**SMALL, "norm": "pre", "share_embeddings": False, "tie_output": True}),
}
TRAIN = {
    "epochs": 8,
    "lr": 3e-3,
    "schedule": "inverse_sqrt",
    "schedule_options": {"warmup_steps": 30},
    "batch_size": 32,
    "threads": 1,
    "device": "cpu",
}


@pytest.fixture(scope="session")
def models(tmp_path_factory, corpus_dir) -> dict[str, dict[str, Path]]:
    """name -> {"config", "checkpoint", "fp32", "int8"}: trained side by side, exported; once per
    session under pytest-xdist too (helpers.built_once)."""
    from helpers import ct2_export

    with built_once(tmp_path_factory, "export-models") as (work, built):
        out = {
            name: {
                "config": work / f"{name}.yaml",
                "checkpoint": work / "checkpoints" / name / "best.pt",
                "fp32": work / "exports" / f"{name}.fp32",
                "int8": work / "exports" / f"{name}.int8",
            }
            for name in VARIANTS
        }
        if not built:
            for name, (tok, model) in VARIANTS.items():
                write_config(out[name]["config"], work, corpus_dir, tokenizer=tok, model=model, train=TRAIN)
            # forks of one process that has imported tfm and torch already
            commands = (("train", "-c", str(paths["config"]), "--quiet") for paths in out.values())
            for name, run in zip(out, forks().run_all(work / "logs", *commands)):
                assert run.returncode == 0, f"{name}: {run.stderr}"
                for quantization, label in (("none", "fp32"), ("int8", "int8")):
                    ct2_export(out[name]["checkpoint"], out[name][label], quantization)
    return out


# oneDNN's instruction sets without VNNI, as ONEDNN_MAX_CPU_ISA names them
_NO_VNNI = {"SSE41", "AVX", "AVX2", "AVX512_CORE"}


def int8_kernels_saturate() -> bool:
    """Whether CTranslate2 runs int8 products here through oneDNN's u8·s8 kernels without VNNI,
    which add pairs of products in 16 bits and saturate (docs/export-ctranslate2.md): an x86 CPU
    without VNNI, or one told to act as such (ONEDNN_MAX_CPU_ISA=AVX2), and not MKL, which
    CTranslate2 uses on Intel CPUs unless CT2_USE_MKL=0."""
    if platform.machine() not in ("x86_64", "AMD64"):
        return False
    cpuinfo = (
        Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace") if Path("/proc/cpuinfo").exists() else ""
    )
    flags = next((line.split(":", 1)[1].split() for line in cpuinfo.splitlines() if line.startswith("flags")), [])
    capped = os.environ.get("ONEDNN_MAX_CPU_ISA", os.environ.get("DNNL_MAX_CPU_ISA", "")).upper() in _NO_VNNI
    vnni = bool({"avx512_vnni", "avx_vnni"} & set(flags)) and not capped
    mkl = os.environ.get("CT2_USE_MKL", "1" if "GenuineIntel" in cpuinfo else "0") == "1"
    return not vnni and not mkl
