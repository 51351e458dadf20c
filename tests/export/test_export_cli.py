"""`tfm export`, then the export used wherever a checkpoint is: `tfm translate`, `tfm evaluate`,
`tfm.load`; and `tfm export` without the optional dependency."""

from __future__ import annotations

import json
import subprocess
import sys

import torch

import transformer_cli as tfm
from reliability.cron_helpers import TFM
from transformer_cli import __version__
from transformer_cli.checkpoint import load_checkpoint
from transformer_cli.export.bundle import MANIFEST, file_sha256, is_export

LINES = ["Ein mann sieht einen ball.", "Eine frau malt eine blume am strand.", "Zwei hunde."]
NO_CT2 = ("import sys, runpy; sys.modules['ctranslate2'] = None; "  # `import ctranslate2` fails
          "sys.argv = ['tfm', *sys.argv[1:]]; runpy.run_module('transformer_cli', run_name='__main__')")


def run_side_by_side(*argvs: list[str]) -> list[subprocess.CompletedProcess]:
    procs = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for argv in argvs]
    return [subprocess.CompletedProcess(p.args, p.returncode, *p.communicate(timeout=180))
            for p in procs]


def test_export_then_translate_and_evaluate(models, tmp_path):
    m = models["subword-post"]
    out = tmp_path / "int8 export"
    cfg, fp32, ckpt = str(m["config"]), str(m["fp32"]), str(m["checkpoint"])
    export, tr_export, tr_ckpt, ev_export, ev_ckpt, no_ct2 = run_side_by_side(
        [*TFM, "export", "-c", cfg, "--quantization", "int8", "--output", str(out)],
        [*TFM, "translate", "--checkpoint", fp32, "--beam-size", "5", "--n-best", "2", *LINES],
        [*TFM, "translate", "--checkpoint", ckpt, "--beam-size", "5", "--n-best", "2", *LINES],
        [*TFM, "evaluate", "-c", cfg, "--checkpoint", fp32, "--json", "-q"],
        [*TFM, "evaluate", "-c", cfg, "--checkpoint", ckpt, "--json", "-q"],
        [sys.executable, "-c", NO_CT2, "export", "-c", cfg, "--output", str(tmp_path / "never")])

    assert export.returncode == 0, export.stderr
    assert export.stdout.startswith(f"exported {m['run'] if 'run' in m else ''}") or "int8 weights" in export.stdout
    manifest = json.loads((out / MANIFEST).read_text())
    published = m["checkpoint"].parent / "published.pt"  # the config's default model
    assert manifest["checkpoint"] == str(published) and manifest["quantization"] == "int8"
    assert manifest["checkpoint_sha256"] == load_checkpoint(published)["sha256"]
    assert manifest["checkpoint_file_sha256"] == file_sha256(published)
    assert manifest["tfm_version"] == __version__
    assert {"model.bin", "shared_vocabulary.json", "tokenizer.json", "spm.shared.model"} <= set(manifest["files"])
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temp folder left

    assert tr_export.returncode == 0 and tr_ckpt.returncode == 0, tr_export.stderr + tr_ckpt.stderr
    assert tr_export.stdout == tr_ckpt.stdout and len(tr_export.stdout.splitlines()) == 6

    assert ev_export.returncode == 0 and ev_ckpt.returncode == 0, ev_export.stderr + ev_ckpt.stderr
    a, b = json.loads(ev_export.stdout), json.loads(ev_ckpt.stdout)
    assert abs(a["loss"] - b["loss"]) < 1e-4 and (a["bleu"], a["chrf"]) == (b["bleu"], b["chrf"])
    with open(a["hypotheses"]) as fa, open(b["hypotheses"]) as fb:
        assert fa.read() == fb.read()

    assert no_ct2.returncode == 2 and not (tmp_path / "never").exists()
    assert no_ct2.stderr == ("tfm: error: CTranslate2 is not installed; install it with: "
                             "pip install 'tfm[ctranslate2]'\n")


def test_python_api_loads_an_export_by_its_content(models, tmp_path):
    m = models["words-pre"]
    renamed = tmp_path / "anything.pt"  # detected by its manifest, not by its name
    m["fp32"].rename(renamed)
    try:
        assert is_export(renamed)
        exported, native = tfm.load(renamed, device="cpu"), tfm.load(m["checkpoint"], device="cpu")
        assert exported.translate(LINES, beam_size=3, n_best=2) == native.translate(LINES, beam_size=3, n_best=2)
        assert exported.sha256 == native.sha256 and exported.config_name == native.config_name
        att_a, att_b = exported.attention(LINES[0]), native.attention(LINES[0])
        assert att_a.target_tokens == att_b.target_tokens
        assert torch.allclose(torch.tensor(att_a.weights), torch.tensor(att_b.weights), atol=1e-5)
    finally:
        renamed.rename(m["fp32"])
