"""`tfm export`, then the export used wherever a checkpoint is: `tfm translate`, `tfm evaluate`,
`tfm.load`; and `tfm export` without the optional dependency."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from reliability.cron_helpers import TFM
from typer.testing import CliRunner

import transformer_cli as tfm
from transformer_cli import __version__
from transformer_cli.checkpoint import read_payload
from transformer_cli.cli import app
from transformer_cli.data.sources import read_lines
from transformer_cli.evaluate import evaluate_texts
from transformer_cli.export_manifest import MANIFEST, is_export
from transformer_cli.fsutil import file_sha256

LINES = ["Ein mann sieht einen ball.", "Eine frau malt eine blume am strand.", "Zwei hunde."]
NO_CT2 = (
    "import sys, runpy; sys.modules['ctranslate2'] = None; "  # `import ctranslate2` fails
    "sys.argv = ['tfm', *sys.argv[1:]]; runpy.run_module('transformer_cli', run_name='__main__')"
)


def run_side_by_side(*argvs: list[str]) -> list[subprocess.CompletedProcess]:
    procs = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for argv in argvs]
    outputs = [p.communicate(timeout=180) for p in procs]
    return [subprocess.CompletedProcess(p.args, p.returncode, *o) for p, o in zip(procs, outputs)]


def test_export_then_translate_and_evaluate(models, corpus_dir, tmp_path):
    m = models["subword-post"]
    out = tmp_path / "int8 export"
    cfg, fp32 = str(m["config"]), str(m["fp32"])
    export, no_ct2 = run_side_by_side(  # as a user runs it
        [*TFM, "export", "-c", cfg, "--quantization", "int8", "--output", str(out)],
        [sys.executable, "-c", NO_CT2, "export", "-c", cfg, "--output", str(tmp_path / "never")],
    )
    cli = CliRunner()  # in this process: no second torch import
    translated = cli.invoke(app, ["translate", "--checkpoint", fp32, "--beam-size", "5", "--n-best", "2", *LINES])
    evaluated = cli.invoke(app, ["evaluate", "-c", cfg, "--checkpoint", fp32, "--json", "-q"])

    published = m["checkpoint"].parent / "published.pt"  # the config's default model
    assert export.returncode == 0, export.stderr
    assert export.stdout.startswith(f"exported {published} -> {out} (ctranslate2, int8 weights, ")
    manifest = json.loads((out / MANIFEST).read_text())
    assert manifest["checkpoint"] == str(published) and manifest["quantization"] == "int8"
    assert manifest["checkpoint_sha256"] == read_payload(published)["sha256"]
    assert manifest["checkpoint_file_sha256"] == file_sha256(published)
    assert manifest["tfm_version"] == __version__
    assert {"model.bin", "shared_vocabulary.json", "tokenizer.json", "spm.shared.model"} <= set(manifest["files"])
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temp folder left

    native = tfm.load(m["checkpoint"], device="cpu")
    assert translated.exit_code == 0, translated.output
    rows = [line.split("\t") for line in translated.stdout.splitlines()]
    assert [r[2] for r in rows] == [t for n_best in native.translate(LINES, 5, 2) for t in n_best]

    assert evaluated.exit_code == 0, evaluated.output
    report = json.loads(evaluated.stdout)
    sources, references = (read_lines(corpus_dir / f"test_2016_flickr.{lang}.gz") for lang in ("de", "en"))
    ours = evaluate_texts(native.backend, sources, references, "test", "x", tmp_path / "hyps.txt")
    assert report["loss"] == pytest.approx(ours.loss, abs=1e-4)
    assert (report["bleu"], report["chrf"]) == (ours.bleu, ours.chrf)
    assert Path(report["hypotheses"]).read_text() == (tmp_path / "hyps.txt").read_text()

    assert no_ct2.returncode == 2 and not (tmp_path / "never").exists()
    assert no_ct2.stderr == (
        "tfm: error: tfm export needs the ctranslate2 extra: pip install "
        "'tfm[ctranslate2]' (import of ctranslate2 halted; None in sys.modules)\n"
    )


def test_python_api_loads_an_export_by_its_content(models, tmp_path):
    m = models["words-pre"]
    renamed = tmp_path / "anything.pt"  # detected by its manifest, not by its name
    m["fp32"].rename(renamed)
    try:
        assert is_export(renamed)
        exported, native = tfm.load(renamed, device="cpu"), tfm.load(m["checkpoint"], device="cpu")
        assert exported.translate(LINES, beam_size=3, n_best=2) == native.translate(LINES, beam_size=3, n_best=2)
        assert exported.backend.metadata.checkpoint_sha256 == native.sha256
        assert exported.sha256 == file_sha256(renamed / MANIFEST) and exported.config_name == native.config_name
        att_a, att_b = exported.attention(LINES[0]), native.attention(LINES[0])
        assert att_a.target_tokens == att_b.target_tokens
        assert torch.allclose(torch.tensor(att_a.weights), torch.tensor(att_b.weights), atol=1e-5)
    finally:
        renamed.rename(m["fp32"])


def test_the_source_truecaser_travels_into_the_export(models):
    m = models["subword-post"]
    exported, native = tfm.load(m["fp32"], device="cpu"), tfm.load(m["checkpoint"], device="cpu")
    recasers = [x.backend.tokenizers.recaser for x in (exported, native)]
    assert recasers[0] is not None and recasers[0].spellings == recasers[1].spellings
    shouted = [line.upper() for line in LINES]
    assert exported.translate(shouted) == native.translate(shouted) == native.translate(LINES)
