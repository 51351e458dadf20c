"""Four tiny models trained once per session (both tokenizer kinds x both norm placements,
covering learned/sinusoidal positions, shared/tied/separate embeddings, relu/gelu and unequal
stacks), each with its float32 and int8 CTranslate2 exports."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers import forks, write_config

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
    "warmup_steps": 30,
    "batch_size": 32,
    "threads": 1,
    "device": "cpu",
}


@pytest.fixture(scope="session")
def models(tmp_path_factory, corpus_dir) -> dict[str, dict[str, Path]]:
    """name -> {"config", "checkpoint", "fp32", "int8"}: trained side by side, exported."""
    from transformer_cli.export.bundle import export_checkpoint

    work = tmp_path_factory.mktemp("export-models")
    configs = {
        name: write_config(work / f"{name}.yaml", work, corpus_dir, tokenizer=tok, model=model, train=TRAIN)
        for name, (tok, model) in VARIANTS.items()
    }
    # forks of one process that has imported tfm and torch already
    runs = forks().run_all(work / "logs", *(("train", "-c", str(cfg), "--quiet") for cfg in configs.values()))
    out = {}
    for name, run in zip(configs, runs):
        assert run.returncode == 0, f"{name}: {run.stderr}"
        checkpoint = work / "checkpoints" / name / "best.pt"
        out[name] = {"config": configs[name], "checkpoint": checkpoint}
        for quantization, label in (("none", "fp32"), ("int8", "int8")):
            out[name][label] = work / "exports" / f"{name}.{label}"
            export_checkpoint(checkpoint, out[name][label], quantization)
    return out
